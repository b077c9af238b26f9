"""End to end: raw sample corpus -> examples -> pretrained BERT, tracked in one MLflow run."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pandas as pd
import torch
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from bert_pipeline.model.checkpoint import load_pretrained

TINY_RUN = {
    "corpus": {"max_documents": 40},
    "pretrain_data": {
        "tokenizer": {"vocab_size": 800},
        "examples": {"dupe_factor": 1, "max_seq_length": 64},
    },
    "pretrain_model": {
        "model": {"overrides": {"hidden_size": 32, "intermediate_size": 64}},
        "schedule": {"warmup_steps": 2, "max_steps": 6},
        "batch_size": 8,
        "val_every_n_steps": 3,
        "log_every_n_steps": 2,
        "checkpoint_every_n_steps": 3,
        "progress_bar": False,
        "accelerator": "cpu",
    },
}


def _artifacts(client: mlflow.MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    found = set()
    for item in client.list_artifacts(run_id, path):
        found |= _artifacts(client, run_id, item.path) if item.is_dir else {item.path}
    return found


def test_pretrain_pipeline_end_to_end(tmp_path: Path, mlflow_uri: str, project_root: Path):
    data_dir = tmp_path / "data"
    bootstrap_project(project_root)
    with KedroSession.create(
        project_path=project_root, runtime_params={"data_dir": str(data_dir), **TINY_RUN}
    ) as session:
        session.run(pipeline_names=["pretrain_data", "pretrain_model"])

    model_dir = data_dir / "06_models" / "bert_pretrained"
    assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer.json"} <= {
        p.name for p in model_dir.iterdir()
    }
    model = load_pretrained(model_dir).eval()
    assert model.config.hidden_size == 32
    assert (data_dir / "06_models" / "pretrain_checkpoints" / "last.ckpt").exists()
    metrics = json.loads((data_dir / "08_reporting" / "pretrain_metrics.json").read_text())
    assert metrics["global_step"] == 6 and metrics["val/mlm_loss"] > 0

    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    experiment = client.get_experiment_by_name("bert_pipeline")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1, "training must log into kedro-mlflow's run, not open its own"
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert {
        "train/loss",
        "train/mlm_loss",
        "train/tokens_per_sec",
        "train/grad_norm",
        "val/mlm_loss",
        "val/mlm_accuracy",
        "val/nsp_accuracy",
        "val/perplexity",
    } <= set(run.data.metrics)
    loss_steps = [m.step for m in client.get_metric_history(run.info.run_id, "train/loss")]
    assert len(loss_steps) == 3
    norms = client.get_metric_history(run.info.run_id, "train/grad_norm")
    assert [m.step for m in norms] == loss_steps and all(m.value > 0 for m in norms)
    assert run.data.params["pretrain_model.optimizer.lr"] == "0.001"
    assert run.data.params["pretrain_model.precision_chosen"] == "32"
    assert run.data.params["pretrain_model.compile_chosen"] == "false"
    artifacts = _artifacts(client, run.info.run_id)
    assert {
        "pretrain_model/pretrain_loss_curve.png",
        "pretrain_model/pretrain_metrics.json",
    } <= artifacts

    # The model in MLflow: a LoggedModel of the run, registered as bert-pretrained, the same model
    (logged,) = client.search_logged_models([experiment.experiment_id])
    assert logged.source_run_id == run.info.run_id
    assert client.get_model_version("bert-pretrained", "1").run_id == run.info.run_id
    record = json.loads((data_dir / "08_reporting" / "pretrained_model_mlflow.json").read_text())
    assert record["registered_version"] == 1 and record["model_id"] == logged.model_id
    local = mlflow.artifacts.download_artifacts(
        artifact_uri="models:/bert-pretrained/1", dst_path=str(tmp_path / "dl")
    )
    card = (model_dir / "README.md").read_text()
    assert "## Training data" in card and "Masked-LM accuracy" in card
    assert "- Precision 32; dropout 0.1." in card
    assert (Path(local) / "artifacts" / "model" / "README.md").read_text() == card
    assert client.get_model_version("bert-pretrained", "1").description == card
    again = load_pretrained(Path(local) / "artifacts" / "model").eval()
    ids = torch.tensor([[2, 10, 11, 3, 12, 3]])
    with torch.no_grad():
        assert torch.equal(model(ids).prediction_logits, again(ids).prediction_logits)
    pyfunc = mlflow.pyfunc.load_model("models:/bert-pretrained/1")
    embedded = pyfunc.predict(pd.DataFrame({"text_a": ["one sentence", "and another one"]}))
    assert list(embedded.columns) == ["cls_embedding", "mean_embedding"]
    assert [len(v) for v in embedded["cls_embedding"]] == [32, 32]
    _check_surface(client, experiment, run, logged, data_dir)


def _check_surface(client, experiment, run, logged, data_dir: Path) -> None:
    """What the UI shows: a model-training experiment, a named model with its metrics and
    `@best`, one learning-rate chart, no one-point charts, a description, the examples' row
    count; the export names its run (lineage of the models fine-tuned from it)."""
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert logged.name == "bert-pretrained"
    assert {m.key for m in logged.metrics} >= {"val/mlm_accuracy", "val/mlm_loss"}
    assert "train/lr" in run.data.metrics
    noise = {"epoch", "train/mean_tokens_per_sec"}
    assert not [k for k in run.data.metrics if k.startswith("lr-") or k in noise]
    assert str(client.get_model_version_by_alias("bert-pretrained", "best").version) == "1"
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("`kedro run --pipelines pretrain_data,pretrain_model`")
    assert "validation MLM accuracy" in note
    (examples,) = [i.dataset for i in run.inputs.dataset_inputs]
    rows = json.loads((data_dir / "08_reporting" / "pretrain_data_statistics.json").read_text())
    assert json.loads(examples.profile) == {"num_rows": rows["n_examples"]}
    assert run.data.params["pretrain_data.n_examples"] == str(rows["n_examples"])
    config = json.loads((data_dir / "06_models" / "bert_pretrained" / "config.json").read_text())
    assert config["mlflow_run_id"] == run.info.run_id
