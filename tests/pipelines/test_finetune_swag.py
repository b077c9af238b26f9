"""End to end: `finetune_swag` on SWAG-format CSV files and a tiny model, tracked as a child
MLflow run with a registered model that answers; a bad example stops it before any output."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from bert_pipeline.model.checkpoint import write_checkpoint
from tests.glue.helpers import tiny_checkpoint
from tests.swag.helpers import swag_rows, write_swag_csvs

FAST = {"training": {"epochs": 2, "batch_size": 8, "max_seq_length": 40, "progress_bar": False}}


@pytest.fixture
def swag_project(tmp_path: Path, project_root: Path):
    texts = [v for r in swag_rows(40) for k, v in r.items() if k.startswith(("sent", "ending"))]
    model = write_checkpoint(tiny_checkpoint(texts), tmp_path / "pretrained")
    bootstrap_project(project_root)
    runtime = {
        "data_dir": str(tmp_path / "data"),
        "swag_dir": str(write_swag_csvs(tmp_path / "swag")),
        "swag_model_dir": str(model),
        "finetune_swag": FAST,
    }
    return project_root, runtime, tmp_path / "data"


def _run(project) -> None:
    project_root, runtime, _ = project
    with KedroSession.create(project_path=project_root, runtime_params=runtime) as session:
        session.run(pipeline_names=["finetune_swag"])


def test_swag_end_to_end(swag_project, mlflow_uri: str):
    _run(swag_project)
    data = swag_project[2]
    record = json.loads((data / "08_reporting" / "swag_metrics.json").read_text())
    assert record["examples"] == {"train": 24, "dev": 8, "test": 5}
    assert 0 <= record["dev_metrics"]["accuracy"] <= 1
    assert len(record["trials"][0]["history"]) == 2  # a dev pass per epoch
    test = pd.read_csv(data / "07_model_output" / "swag" / "test_predictions.csv")
    assert list(test.columns) == ["id", "ending0", "ending1", "ending2", "ending3"]
    assert test["id"].tolist() == [f"test-{k}" for k in range(5)]  # test.csv's order
    assert ((test.iloc[:, 1:].sum(axis=1) - 1).abs() < 1e-5).all()
    config = json.loads((data / "06_models" / "swag" / "config.json").read_text())
    assert config["architectures"] == ["BertForMultipleChoice"]

    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("bert_pipeline").experiment_id])
    (child,) = [r for r in runs if r.data.tags.get("mlflow.runName") == "swag"]
    assert child.data.params["max_seq_length"] == "40"  # the hyperparameters are the run's
    history = client.get_metric_history(child.info.run_id, "lr_0.001_seed_42/dev_accuracy")
    assert len(history) == 2  # per-epoch dev accuracy
    assert {i.dataset.name for i in child.inputs.dataset_inputs} == {"swag_train", "swag_dev"}
    version = client.get_model_version_by_alias("bert-swag", "best")
    assert version.run_id == child.info.run_id
    (model,) = client.search_logged_models([child.info.experiment_id])
    assert model.name == "bert-swag" and "best_dev_accuracy" in {m.key for m in model.metrics}
    chooser = mlflow.pyfunc.load_model("models:/bert-swag@best")
    row = {k: v for k, v in swag_rows(1, 9)[0].items() if k.startswith(("sent", "ending"))}
    answer = chooser.predict(
        pd.DataFrame([row]).rename(columns={"sent1": "context", "sent2": "start"})
    )
    assert list(answer.columns) == ["label", "score"]
    assert answer["label"][0] in range(4) and 0.25 <= answer["score"][0] <= 1


def test_a_bad_example_stops_before_any_output(swag_project, mlflow_uri: str):
    val = Path(swag_project[1]["swag_dir"]) / "val.csv"
    frame = pd.read_csv(val)
    frame.loc[3, "label"] = 7
    frame.to_csv(val, index=False)
    with pytest.raises(Exception, match=r"val.csv line 5: label '7' is not one of 0-3"):
        _run(swag_project)
    assert [p.name for p in swag_project[2].iterdir()] == [".run.lock"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"data": {"dev_share": 1.5}}, r"finetune_swag.data.dev_share=1.5 must be in \(0, 1\)"),
        ({"training": {"epochs": 0}}, r"finetune_swag.training.epochs=0 must be >= 1"),
    ],
)
def test_bad_parameters_stop_the_run_before_the_first_node(
    swag_project, mlflow_uri: str, params, message
):
    project_root, runtime, data = swag_project
    runtime = {**runtime, "finetune_swag": params}
    with pytest.raises(ValueError, match=message):
        _run((project_root, runtime, data))
    assert [p.name for p in data.iterdir()] == [".run.lock"]
