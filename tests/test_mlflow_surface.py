"""What a person sees of the project in MLflow's UI, checked on a throw-away store: the
experiment's kind, the registry's `@best` alias, a dataset's row count, a fine-tuning run's
lineage, run descriptions, a data summary as parameters (the pipelines: tests/pipelines)."""

from __future__ import annotations

import hashlib
import json

import mlflow
import pytest
from mlflow.entities import LoggedModelOutput

from bert_pipeline import tracking
from bert_pipeline.hooks import TrackingHooks
from bert_pipeline.hooks.tracking import run_command
from bert_pipeline.io.mlflow_params_dataset import MlflowParamsDataset
from bert_pipeline.model.checkpoint import write_checkpoint
from tests.glue.helpers import tiny_checkpoint


@pytest.fixture
def store(mlflow_uri: str):
    mlflow.set_tracking_uri(mlflow_uri)
    mlflow.set_experiment("surface")
    yield mlflow.MlflowClient(mlflow_uri)
    mlflow.set_tracking_uri(None)


def test_an_existing_experiment_becomes_a_model_training_one(store):
    """MLflow 3.17's UI shows GenAI pages to an experiment without this tag."""
    with mlflow.start_run() as run:
        assert "mlflow.experimentKind" not in store.get_experiment(run.info.experiment_id).tags
        TrackingHooks().before_pipeline_run()
    tags = store.get_experiment(run.info.experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"


def test_best_alias_moves_only_to_a_better_version(store):
    store.create_registered_model("bert-glue-rte")
    for score in (0.5, 0.4, 0.6, 0.6):
        version = store.create_model_version("bert-glue-rte", "file:///nowhere").version
        tracking.promote("bert-glue-rte", version, "best_score", score)
        assert store.get_model_version("bert-glue-rte", version).tags["best_score"] == str(score)
    best = store.get_model_version_by_alias("bert-glue-rte", tracking.BEST_ALIAS)
    assert str(best.version) == "3"  # 0.4 did not take it from 1, an equal 0.6 not from 3


def test_examples_input_shows_its_row_count(store, tmp_path):
    import pyarrow as pa

    schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("example_id", pa.string())])
    with mlflow.start_run() as run:
        tracking.log_table_input("pretraining_examples", tmp_path, "ab" * 32, 1234, schema)
    (found,) = store.get_run(run.info.run_id).inputs.dataset_inputs
    assert json.loads(found.dataset.profile) == {"num_rows": 1234}


def test_a_fine_tuning_run_records_the_model_it_started_from(store, tmp_path):
    with mlflow.start_run() as pretraining:  # a LoggedModel of the pretraining run
        model = mlflow.initialize_logged_model("bert-pretrained")
        mlflow.log_outputs([LoggedModelOutput(model.model_id, step=0)])
    checkpoint = tiny_checkpoint()
    checkpoint["config"]["mlflow_run_id"] = pretraining.info.run_id
    folder = write_checkpoint(checkpoint, tmp_path / "pretrained")
    checkpoint["config"]["_name_or_path"] = str(folder)  # as CheckpointDataset.load names it

    with mlflow.start_run() as run:
        tracking.log_model_input(checkpoint)
    found = store.get_run(run.info.run_id)
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert found.data.params["pretrained_model"] == str(folder.resolve())
    assert found.data.params["pretrained_model_sha256"] == digest
    assert found.data.params["pretrained_run_id"] == pretraining.info.run_id
    assert [m.model_id for m in found.inputs.model_inputs] == [model.model_id]


def test_runs_are_described(store):
    with mlflow.start_run() as parent:
        with tracking.task_run("glue_rte", {}, tiny_config(), {}) as child:
            child.describe("GLUE rte: best dev score 61.00.")
        tracking.describe_run("GLUE average 61.0 over 1 tasks.")
        tracking.describe_pipeline_run(
            run_command({"pipeline_names": ["finetune_glue"], "namespaces": None, "env": None})
        )
    note = store.get_run(parent.info.run_id).data.tags["mlflow.note.content"]
    assert note.split("\n\n") == [
        "`kedro run --pipelines finetune_glue`",
        "GLUE average 61.0 over 1 tasks.",
        "- **glue_rte**: GLUE rte: best dev score 61.00.",
    ]


def test_data_summary_is_logged_as_parameters_not_one_point_metrics(store):
    dataset = MlflowParamsDataset(prefix="pretrain_data")
    with mlflow.start_run() as run:
        dataset.save({"n_examples": 120, "truncated_share": 0.25})
        assert dataset.load() == {"n_examples": "120", "truncated_share": "0.25"}
    found = store.get_run(run.info.run_id).data
    assert found.params["pretrain_data.n_examples"] == "120" and not found.metrics


def tiny_config():
    from bert_pipeline.glue.config import GlueConfig

    return GlueConfig()
