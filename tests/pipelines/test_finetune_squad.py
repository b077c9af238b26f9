"""End to end: `finetune_squad` on generated SQuAD v2.0 files and a tiny model, tracked as a
child MLflow run; a bad answer offset stops it before any output."""

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
from tests.squad.helpers import squad_document, write_squad_folder

FAST = {
    "training": {
        "epochs": 1,
        "batch_size": 8,
        "max_seq_length": 48,
        "doc_stride": 8,
        "max_query_length": 16,
    }
}


@pytest.fixture
def squad_project(tmp_path: Path, project_root: Path):
    texts = []
    for article in squad_document(20, "vocab", True)["data"]:
        for p in article["paragraphs"]:
            texts += [p["context"], *(q["question"] for q in p["qas"])]
    model = write_checkpoint(tiny_checkpoint(texts), tmp_path / "pretrained")
    bootstrap_project(project_root)
    runtime = {
        "data_dir": str(tmp_path / "data"),
        "squad_dir": str(write_squad_folder(tmp_path / "squad", version_2=True)),
        "squad_model_dir": str(model),
        "finetune_squad": FAST,
    }
    return project_root, runtime, tmp_path / "data"


def _run(project) -> None:
    project_root, runtime, _ = project
    with KedroSession.create(project_path=project_root, runtime_params=runtime) as session:
        session.run(pipeline_names=["finetune_squad"])


def test_squad_v2_end_to_end(squad_project, mlflow_uri: str):
    _run(squad_project)
    data = squad_project[2]
    record = json.loads((data / "08_reporting" / "squad_metrics.json").read_text())
    assert record["version"] == "2.0" and record["dev_questions"] == 45
    assert {"exact_match", "f1", "HasAns_f1", "NoAns_f1"} <= set(record["dev_metrics"])
    predictions = json.loads((data / "07_model_output" / "squad" / "predictions.json").read_text())
    odds = json.loads((data / "07_model_output" / "squad" / "null_odds.json").read_text())
    assert set(predictions) == set(odds) and len(predictions) == 45
    assert all(isinstance(v, str) for v in predictions.values())
    config = json.loads((data / "06_models" / "squad" / "config.json").read_text())
    assert config["architectures"] == ["BertForQuestionAnswering"]

    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("bert_pipeline").experiment_id])
    (child,) = [r for r in runs if "squad_version" in r.data.tags]
    assert child.data.tags["squad_version"] == "2.0"
    assert {"best_dev_f1", "best_dev_HasAns_f1"} <= set(child.data.metrics)
    assert child.data.params["doc_stride"] == "8"  # the hyperparameters are the run's params
    assert {i.dataset.name for i in child.inputs.dataset_inputs} == {"squad_train", "squad_dev"}
    assert "predictions.json" in {a.path for a in client.list_artifacts(child.info.run_id)}
    # The reader: a named, registered model with its metrics that answers from the context
    version = client.get_model_version_by_alias("bert-squad", "best")
    assert version.run_id == child.info.run_id
    (model,) = client.search_logged_models([child.info.experiment_id])
    assert model.name == "bert-squad" and model.source_run_id == child.info.run_id
    assert {"best_dev_exact_match", "best_dev_f1"} <= {m.key for m in model.metrics}
    reader = mlflow.pyfunc.load_model("models:/bert-squad@best")
    context = "The river runs past the old mill to the sea."
    answer = reader.predict(
        pd.DataFrame({"question": ["Where does it run?"], "context": [context]})
    )
    assert list(answer.columns) == ["answer", "null_score_diff"]
    assert answer["answer"][0] in context
    assert "dev EM" in child.data.tags["mlflow.note.content"]


def test_an_answer_off_its_context_stops_before_any_output(squad_project, mlflow_uri: str):
    dev = Path(squad_project[1]["squad_dir"]) / "dev.json"
    document = json.loads(dev.read_text())
    document["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 2
    dev.write_text(json.dumps(document))
    with pytest.raises(Exception, match=r"dev.json: question 'q3-0': answer .* is not at"):
        _run(squad_project)
    assert [p.name for p in squad_project[2].iterdir()] == [".run.lock"]
