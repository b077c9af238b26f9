"""End to end: `finetune_ner` and `finetune_ner_features` on generated CoNLL files and a tiny
model, each tagger tracked as a child MLflow run with its data as dataset inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from bert_pipeline.model.checkpoint import write_checkpoint
from tests.glue.helpers import tiny_checkpoint
from tests.ner.helpers import sentence, write_conll_folder

FAST = {
    "finetune": {"epochs": 2, "batch_size": 4, "max_seq_length": 48},
    "feature_based": {
        "epochs": 2,
        "batch_size": 8,
        "max_seq_length": 48,
        "lstm_width": 8,
        "layer_choices": ["last", "concat_last_four"],
    },
}


@pytest.fixture
def ner_project(tmp_path: Path, project_root: Path):
    rng = random.Random(1)
    texts = [" ".join(w for w, _ in sentence(rng)) for _ in range(300)]
    model = write_checkpoint(tiny_checkpoint(texts), tmp_path / "pretrained")
    bootstrap_project(project_root)
    runtime = {
        "data_dir": str(tmp_path / "data"),
        "conll_dir": str(write_conll_folder(tmp_path / "conll", scheme="IOB1")),
        "conll_scheme": "IOB1",
        "ner_model_dir": str(model),
        "finetune_ner": FAST,
    }
    return project_root, runtime, tmp_path / "data"


def _run(ner_project, pipeline: str, **kwargs) -> None:
    project_root, runtime, _ = ner_project
    with KedroSession.create(project_path=project_root, runtime_params=runtime) as session:
        session.run(pipeline_names=[pipeline], **kwargs)


def test_both_taggers_end_to_end(ner_project, mlflow_uri: str):
    _run(ner_project, "finetune_ner")
    _run(ner_project, "finetune_ner_features")
    data = ner_project[2]
    assert (data / "06_models" / "ner" / "model.safetensors").is_file()
    config = json.loads((data / "06_models" / "ner" / "config.json").read_text())
    assert config["architectures"] == ["BertForTokenClassification"]
    assert config["id2label"]["0"] == "O"
    cache = json.loads((data / "05_model_input" / "ner_features" / "config.json").read_text())
    assert cache["layers"] == [0, 1, 2] and cache["words"]["dev"] > 0
    for mode in ("finetune", "feature_based"):
        record = json.loads((data / "08_reporting" / "ner" / f"{mode}_metrics.json").read_text())
        assert set(record["dev_metrics"]) == {"precision", "recall", "f1", "f1_strict"}
        assert 0 <= record["test_metrics"]["f1"] <= 1
        lines = (data / "07_model_output" / "ner" / f"{mode}_dev.conll").read_text().splitlines()
        rows = [line.split() for line in lines if line and not line.startswith("-DOCSTART-")]
        assert all(len(r) == 3 for r in rows)  # word gold predicted
        gold = [r[1] for r in rows]
        assert "I-PER" in gold and not any(t.startswith("B-") for t in gold)  # IOB1 as read
    record = json.loads((data / "08_reporting" / "ner" / "feature_based_metrics.json").read_text())
    assert set(record["dev_f1_by_choice"]) == {"last", "concat_last_four"}

    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    experiment = client.get_experiment_by_name("bert_pipeline")
    runs = client.search_runs([experiment.experiment_id])
    children = {r.data.tags["ner_mode"]: r for r in runs if "ner_mode" in r.data.tags}
    assert set(children) == {"finetune", "feature_based"}
    for run in children.values():
        assert "mlflow.parentRunId" in run.data.tags
        assert {"best_dev_f1", "test_f1"} <= set(run.data.metrics)
        assert run.data.params["max_seq_length"] == "48"  # the hyperparameters are its params
        names = {i.dataset.name for i in run.inputs.dataset_inputs}
        assert names == {"conll_train", "conll_dev", "conll_test"}
    history = client.get_metric_history(
        children["feature_based"].info.run_id, "last_lr_0.001_seed_42/dev_f1"
    )
    assert len(history) == 2
    # The fine-tuned tagger: a named, registered model with its metrics that tags words
    version = client.get_model_version_by_alias("bert-ner", "best")
    assert version.run_id == children["finetune"].info.run_id
    (model,) = client.search_logged_models([experiment.experiment_id])  # the tagger only
    assert model.name == "bert-ner" and "best_dev_f1" in {m.key for m in model.metrics}
    tagger = mlflow.pyfunc.load_model("models:/bert-ner@best")
    tagged = tagger.predict(pd.DataFrame({"text_a": ["John lives in Paris", "Hello"]}))
    assert tagged["tokens"].map(len).tolist() == [4, 1]
    labels = set(config["id2label"].values())
    assert tagged["tags"].map(len).tolist() == [4, 1] and set(sum(tagged["tags"], [])) <= labels
    for mode, run in children.items():
        assert run.data.tags["mlflow.note.content"].startswith("NER "), mode


def test_a_malformed_conll_line_stops_before_any_output(ner_project, mlflow_uri: str):
    conll = Path(ner_project[1]["conll_dir"])
    with (conll / "valid.txt").open("a") as f:
        f.write("Kelbridge NNP B-NP B-CITY\n")
    with pytest.raises(Exception, match=r"valid.txt:\d+: unknown tag 'B-CITY'"):
        _run(ner_project, "finetune_ner")
    assert [p.name for p in ner_project[2].iterdir()] == [".run.lock"]
