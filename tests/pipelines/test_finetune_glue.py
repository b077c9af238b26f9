"""End to end: two GLUE tasks (RTE classification, STS-B regression) on a tiny model, tracked
in MLflow as one child run per task under the pipeline's run."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from bert_pipeline.model.checkpoint import write_checkpoint
from tests.glue.helpers import tiny_checkpoint, write_glue_tsv

FAST = {
    "data": {"max_train_examples": 12},
    "defaults": {
        "learning_rates": [1.0e-3],
        "epochs": 2,
        "batch_size": 8,
        "max_seq_length": 32,
    },
}


@pytest.fixture
def glue_project(tmp_path: Path, project_root: Path, monkeypatch: pytest.MonkeyPatch):
    """A conf copy whose finetune_glue.tasks is [rte, stsb], GLUE fixtures and a tiny model."""
    conf = tmp_path / "conf"
    shutil.copytree(project_root / "conf" / "base", conf / "base")
    (conf / "local").mkdir()
    params_file = conf / "base" / "parameters_finetune_glue.yml"
    params = yaml.safe_load(params_file.read_text())
    params["finetune_glue"]["tasks"] = ["rte", "stsb"]
    params_file.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)  # the pipeline reads its task list from ./conf
    raw = write_glue_tsv(tmp_path / "glue_data", tasks=["rte", "stsb"])
    model = write_checkpoint(tiny_checkpoint(), tmp_path / "pretrained")
    bootstrap_project(project_root)
    runtime = {
        "data_dir": str(tmp_path / "data"),
        "glue_raw_dir": str(raw),
        "glue_model_dir": str(model),
        "finetune_glue": FAST,
    }
    return project_root, conf, runtime, tmp_path


def _run(glue_project, **kwargs):
    project_root, conf, runtime, _ = glue_project
    with KedroSession.create(
        project_path=project_root, conf_source=str(conf), runtime_params=runtime
    ) as session:
        session.run(pipeline_names=["finetune_glue"], **kwargs)


def test_finetune_glue_end_to_end(glue_project, mlflow_uri: str):
    _run(glue_project)
    data = glue_project[3] / "data"

    summary = pd.read_csv(data / "08_reporting" / "glue_summary.csv")
    assert summary["task"].tolist() == ["stsb", "rte", "GLUE average"]  # GLUE order
    scores = summary.set_index("task")["score"]
    assert scores["GLUE average"] == pytest.approx((scores["rte"] + scores["stsb"]) / 2, abs=0.01)
    assert summary.set_index("task").loc["stsb", "metrics"] == "pearson/spearman"
    assert "| GLUE average |" in (data / "08_reporting" / "glue_summary.md").read_text()

    with zipfile.ZipFile(data / "07_model_output" / "glue_submission.zip") as archive:
        assert sorted(archive.namelist()) == ["RTE.tsv", "STS-B.tsv"]
        rte = archive.read("RTE.tsv").decode().splitlines()
    assert rte[0] == "index\tprediction" and len(rte) == 6
    assert {line.split("\t")[1] for line in rte[1:]} <= {"entailment", "not_entailment"}
    assert (data / "06_models" / "glue" / "stsb" / "model.safetensors").is_file()
    card = (data / "06_models" / "glue" / "stsb" / "README.md").read_text()
    assert "GLUE stsb" in card and "pearson" in card

    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    experiment = client.get_experiment_by_name("bert_pipeline")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1
    assert sorted(r.data.tags["glue_task"] for r in children) == ["rte", "stsb"]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    stsb = next(r for r in children if r.data.tags["glue_task"] == "stsb")
    assert stsb.data.params["learning_rates"] == "[0.001]"
    history = client.get_metric_history(stsb.info.run_id, "lr_0.001_seed_42/dev_pearson")
    assert len(history) == 2  # one dev pass per epoch, at the step it ended on
    inputs = {i.dataset.name: i.dataset for i in stsb.inputs.dataset_inputs}
    assert set(inputs) == {"glue_stsb_train", "glue_stsb_dev"}  # lineage on the task's run
    assert '"num_rows": 12' in inputs["glue_stsb_train"].profile
    artifacts = {a.path for a in client.list_artifacts(stsb.info.run_id)}
    assert {"predictions", "dev_metrics.json"} <= artifacts
    # The best model: a LoggedModel of the task's run, registered as bert-glue-<task>, loadable
    logged = client.search_logged_models([experiment.experiment_id])
    assert sorted(m.source_run_id == stsb.info.run_id for m in logged) == [False, True]
    version = client.get_model_version("bert-glue-stsb", "1")
    assert version.run_id == stsb.info.run_id
    rte = mlflow.pyfunc.load_model("models:/bert-glue-rte/1")
    pairs = pd.DataFrame({"text_a": ["A man plays.", "It rains."], "text_b": ["A man.", "Sun."]})
    answer = rte.predict(pairs)
    assert list(answer.columns) == ["label", "score"] and len(answer) == 2
    assert set(answer["label"]) <= {"entailment", "not_entailment"}
    assert answer["score"].between(0.5, 1).all()  # the winning class's probability
    stsb_answer = mlflow.pyfunc.load_model("models:/bert-glue-stsb/1").predict(pairs)
    assert list(stsb_answer.columns) == ["score"]
    parent = parents[0]
    assert "glue.average" in parent.data.metrics
    _check_surface(client, logged, stsb, parent, Path(glue_project[2]["glue_model_dir"]), card)
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "glue")} == {
        "glue/glue_summary.csv",
        "glue/glue_summary.md",
        "glue/glue_submission.zip",
    }


def test_a_random_init_baseline_is_named_as_such(glue_project, mlflow_uri: str):
    """random_init_seed fine-tunes fresh weights of the model's architecture: the card, the
    run's note and params say so, and the pretrained folder is not claimed as its start."""
    defaults = {**FAST["defaults"], "random_init_seed": 7, "selection_holdout": 0.5}
    glue_project[2]["finetune_glue"] = {**FAST, "defaults": defaults}
    _run(glue_project, namespaces=["rte"])
    data = glue_project[3] / "data"
    card = (data / "06_models" / "glue" / "rte" / "README.md").read_text()
    assert "fine-tuned from a random init (seed 7) of" in card
    # what benchmarks/bert_tiny_comparison.py collects: hold-out and dev per trial and epoch
    record = json.loads((data / "08_reporting" / "glue" / "rte" / "dev_metrics.json").read_text())
    epoch = record["trials"][0]["history"][0]["metrics"]
    assert set(epoch) == {"train_holdout", "dev"} and record["train_examples"] == 12
    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    experiment = client.get_experiment_by_name("bert_pipeline")
    (rte,) = [
        r for r in client.search_runs([experiment.experiment_id]) if "glue_task" in r.data.tags
    ]
    assert rte.data.params["random_init_seed"] == "7"
    assert "pretrained_model" not in rte.data.params
    assert "a random init (seed 7) of" in rte.data.tags["mlflow.note.content"]
    note = rte.data.tags["mlflow.note.content"]
    assert "best train_holdout score" in note
    assert f"epoch {record['best']['best_epoch'] + 1} of {FAST['defaults']['epochs']})" in note


def _check_surface(client, logged, stsb, parent, pretrained: Path, card: str) -> None:
    """Named models with their metrics, `@best`, the pretrained model a task started from
    (folder and weights digest: the tiny model has no pretraining run), descriptions."""
    assert sorted(m.name for m in logged) == ["bert-glue-rte", "bert-glue-stsb"]
    stsb_model = next(m for m in logged if m.name == "bert-glue-stsb")
    assert {"best_score", "best_dev_pearson"} <= {m.key for m in stsb_model.metrics}
    best = client.get_model_version_by_alias("bert-glue-stsb", "best")
    assert str(best.version) == "1" and "best_score" in best.tags
    weights = hashlib.sha256((pretrained / "model.safetensors").read_bytes()).hexdigest()
    assert stsb.data.params["pretrained_model"] == str(pretrained.resolve())
    assert stsb.data.params["pretrained_model_sha256"] == weights
    assert f"fine-tuned from {pretrained}" in card  # the folder, not the catalog entry
    assert stsb.data.tags["mlflow.note.content"].startswith(
        f"GLUE stsb fine-tuned from {pretrained}"
    )
    note = parent.data.tags["mlflow.note.content"].split("\n\n")
    assert note[0] == "`kedro run --pipelines finetune_glue`"
    assert note[1].startswith("GLUE average ") and "- **glue_stsb**: GLUE stsb" in note[2]


def test_malformed_row_stops_the_task_before_any_output(glue_project, mlflow_uri: str):
    raw = Path(glue_project[2]["glue_raw_dir"])
    with (raw / "STS-B" / "dev.tsv").open("a") as f:
        f.write("99\tg\tf\ty\to\ts\ts\tA man.\tA dog.\t5.5\n")
    with pytest.raises(Exception, match=r"STS-B/dev.tsv:10: bad stsb row: score '5.5' outside"):
        _run(glue_project, namespaces=["stsb"])
    assert [p.name for p in (glue_project[3] / "data").iterdir()] == [".run.lock"]
    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("bert_pipeline").experiment_id])
    assert run.info.status == "FAILED"  # ended by an exception: never left RUNNING
