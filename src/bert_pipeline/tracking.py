"""The project's one route into MLflow, importable without Kedro.

A pipeline's run is kedro-mlflow's; training writes its live metrics into it through the
Lightning logger (`bert_pipeline.training.core.mlflow_logger`). Everything else goes through
here: the experiment's kind, the run's dataset inputs, each fine-tuning task's child run
(`task_run`: inputs, the model it started from, config, best metrics and parameters, records,
predictions, the model, a description), the registry's aliases and the distributed entry
point's own run when no pipeline opened one. Outside an MLflow run every call does nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.data.dataset_source_registry import resolve_dataset_source
from mlflow.data.meta_dataset import MetaDataset

# MLflow 3's UI shows a GenAI app's pages (traces, "Agent versions") to an experiment without
# this tag; `custom_model_development` is its model-training kind.
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
NOTE = "mlflow.note.content"  # the run page's description


def active_run() -> tuple[str | None, str | None]:
    """(run id, tracking URI) of the MLflow run kedro-mlflow opened, or (None, None)."""
    run = mlflow.active_run()
    if run is None:
        return None, None
    return run.info.run_id, mlflow.get_tracking_uri()


def tracking_uri() -> str:
    return mlflow.get_tracking_uri()


def mark_experiment(experiment_id: str) -> None:
    """Tags the experiment as model training, for the UI (existing experiments too)."""
    mlflow.MlflowClient().set_experiment_tag(experiment_id, *EXPERIMENT_KIND)


def describe_run(text: str) -> None:
    """Adds a paragraph to the active run's description (markdown, the run page's
    "Description"): what ran and its headline result."""
    run = mlflow.active_run()
    if run is not None:
        before = mlflow.MlflowClient().get_run(run.info.run_id).data.tags.get(NOTE)
        mlflow.set_tag(NOTE, f"{before}\n\n{text}" if before else text)


def child_runs(experiment_id: str, run_id: str, status: str | None = None) -> list:
    """The nested runs of `run_id` (a pipeline run's fine-tuning tasks), oldest first; only
    those with `status` when given."""
    query = f"tags.`mlflow.parentRunId` = '{run_id}'"
    if status is not None:
        query = f"attributes.status = '{status}' and {query}"
    return mlflow.MlflowClient().search_runs(
        [experiment_id], filter_string=query, order_by=["attributes.start_time ASC"]
    )


def describe_pipeline_run(what: str) -> None:
    """The pipeline run's description: `what` ran, what its nodes said (`describe_run`) and
    one line per child run with that run's own description."""
    run = mlflow.active_run()
    if run is None:
        return
    children = child_runs(run.info.experiment_id, run.info.run_id)
    lines = [f"- **{c.info.run_name}**: {c.data.tags.get(NOTE, '')}" for c in children]
    before = mlflow.MlflowClient().get_run(run.info.run_id).data.tags.get(NOTE)
    mlflow.set_tag(NOTE, "\n\n".join(p for p in (what, before, "\n".join(lines)) if p))


@contextlib.contextmanager
def child_run(name: str, tags: dict[str, str]) -> Iterator[str | None]:
    """A nested MLflow run under the active one (one per fine-tuning task); None if untracked."""
    if mlflow.active_run() is None:
        yield None
        return
    with mlflow.start_run(run_name=name, nested=True, tags=tags) as run:
        yield run.info.run_id


def log_params(params: Mapping[str, Any]) -> None:
    """Parameters of the active run; nothing without one."""
    if mlflow.active_run() is not None:
        mlflow.log_params(dict(params))


def run_params() -> dict[str, str]:
    """The active run's parameters ({} without one)."""
    run = mlflow.active_run()
    return {} if run is None else mlflow.MlflowClient().get_run(run.info.run_id).data.params


def log_config(config: Any, **extra: Any) -> None:
    """A task's hyperparameters (a dataclass) and `extra` as the active run's parameters."""
    values = {k: str(v) for k, v in dataclasses.asdict(config).items()}
    log_params({**values, **{k: str(v) for k, v in extra.items()}})


def log_table_input(
    name: str, source: str, digest: str, rows: int, schema: Any, context: str = "training"
) -> None:
    """A dataset input of the active MLflow run (the run page's "Datasets"), without reading
    the data: name, local source, digest, Arrow schema as MLflow's and the row count."""
    from mlflow.types.schema import Array, ColSpec, DataType, Schema

    if mlflow.active_run() is None:
        return

    def spec(field: Any) -> ColSpec:
        kind = field.type
        if hasattr(kind, "value_type"):  # list<int> token ids
            return ColSpec(Array(DataType.long), field.name)
        name = "string" if "string" in str(kind) else "long"
        return ColSpec(DataType[name], field.name)

    dataset = CountedDataset(
        source=resolve_dataset_source(str(source)),
        name=name,
        digest=digest[:32],
        schema=Schema([spec(f) for f in schema]),
        rows=rows,
    )
    mlflow.log_input(dataset, context=context, tags={"rows": str(rows)})


class CountedDataset(MetaDataset):
    """Metadata of a dataset that is not read, with its row count as the profile that the run
    page's dataset drawer shows (a MetaDataset has none)."""

    def __init__(self, *args: Any, rows: int, **kwargs: Any) -> None:
        self._rows = int(rows)
        super().__init__(*args, **kwargs)

    @property
    def profile(self) -> dict[str, int]:
        return {"num_rows": self._rows}

    def to_dict(self) -> dict[str, str]:
        return {**super().to_dict(), "profile": json.dumps(self.profile)}


def started_from(checkpoint: Mapping) -> dict[str, str]:
    """What identifies the model a fine-tuning run starts from: its folder, the sha256 of its
    weights file and the MLflow run that trained it, each when known."""
    from bert_pipeline.model.checkpoint import SAFETENSORS_FILE

    config = checkpoint.get("config", {})
    found = {}
    folder = config.get("_name_or_path")
    if folder:
        found["pretrained_model"] = str(Path(folder).resolve())
        weights = Path(folder) / SAFETENSORS_FILE
        if weights.is_file():
            with weights.open("rb") as f:
                found["pretrained_model_sha256"] = hashlib.file_digest(f, "sha256").hexdigest()
    if config.get("mlflow_run_id"):
        found["pretrained_run_id"] = str(config["mlflow_run_id"])
    return found


def log_model_input(checkpoint: Mapping) -> None:
    """The model a run starts from: its folder, weights digest and pretraining run as the run's
    parameters, and that run's LoggedModel as the run's model input when it is in this store
    (the run page's "Logged models": the fine-tuned model's lineage)."""
    from mlflow.entities import LoggedModelInput

    found = started_from(checkpoint)
    if mlflow.active_run() is None or not found:
        return
    log_params(found)
    if "pretrained_run_id" not in found:
        return
    try:
        pretraining = mlflow.MlflowClient().get_run(found["pretrained_run_id"])
    except mlflow.exceptions.MlflowException:  # unknown, or trained against another store
        return
    outputs = pretraining.outputs.model_outputs if pretraining.outputs else []
    if outputs:  # the client: MLflow's fluent log_inputs takes models on Databricks only
        mlflow.MlflowClient().log_inputs(
            mlflow.active_run().info.run_id,
            models=[LoggedModelInput(o.model_id) for o in outputs],
        )


def log_frame_input(frame: pd.DataFrame, name: str, context: str = "training") -> None:
    """A pandas table as a dataset input of the active MLflow run (schema, digest, row count)."""
    if mlflow.active_run() is not None:
        mlflow.log_input(mlflow.data.from_pandas(frame, name=name), context=context)


def log_model(
    checkpoint: dict,
    example: pd.DataFrame,
    *,
    name: str,
    metrics: Mapping[str, float] | None = None,
    key_metric: str | None = None,
    step: int = 0,
    **kwargs: Any,
) -> dict[str, Any]:
    """A checkpoint value as a pyfunc LoggedModel `name` of the active run
    (`bert_pipeline.serving`), with `metrics` logged to the run and the model, registered when
    `registered_name` is given and then promoted by `key_metric` (`promote`); what was logged,
    for the run's reports."""
    from bert_pipeline.serving import log_checkpoint_model

    logged = log_checkpoint_model(checkpoint, example, name=name, **kwargs)
    if metrics:
        mlflow.log_metrics(dict(metrics), step=step, model_id=logged["model_id"])
    if logged["registered_name"] and key_metric in (metrics or {}):
        logged["aliases"] = promote(
            logged["registered_name"], logged["registered_version"], key_metric, metrics[key_metric]
        )
    return logged


BEST_ALIAS = "best"


def promote(name: str, version: str | int, metric: str, value: float) -> list[str]:
    """Tags the registered version with its key metric and gives it the `@best` alias when it
    beats the version holding it (higher is better for every key metric of the project); the
    aliases the version now has. MLflow reserves `latest`: `models:/<name>/latest` is always
    the newest version."""
    client = mlflow.MlflowClient()
    version = str(version)
    client.set_model_version_tag(name, version, metric, str(float(value)))
    try:
        holder = client.get_model_version_by_alias(name, BEST_ALIAS)
        current = float(holder.tags.get(metric, "-inf"))
    except mlflow.exceptions.MlflowException:  # no version holds it yet
        current = float("-inf")
    if float(value) > current:
        client.set_registered_model_alias(name, BEST_ALIAS, version)
    return list(client.get_model_version(name, version).aliases)


# ---------------------------------------------------------------------------- a task's run


@dataclasses.dataclass
class TaskRun:
    """One fine-tuning task's child run; `run_id` is None when nothing is tracked."""

    run_id: str | None

    def log_model(self, checkpoint: dict, example: pd.DataFrame, **kwargs: Any) -> dict | None:
        """The task's best model with its metrics (see `log_model`); None when untracked."""
        return None if self.run_id is None else log_model(checkpoint, example, **kwargs)

    def describe(self, text: str) -> None:
        """The run's description: what ran and its headline result."""
        if self.run_id is not None:
            describe_run(text)

    def log_results(
        self,
        params: Mapping[str, Any],
        files: Mapping[str, dict | pd.DataFrame],
        metrics: Mapping[str, float] | None = None,
    ) -> None:
        """Best parameters, files (a dict as JSON, a table as CSV, each at its artifact path:
        `predictions/dev_predictions.csv`) and metrics of a run whose model did not take them
        (`log_model`)."""
        if self.run_id is None:
            return
        if metrics:
            mlflow.log_metrics(dict(metrics))
        mlflow.log_params(dict(params))
        with tempfile.TemporaryDirectory() as tmp:
            for path, value in files.items():
                if isinstance(value, pd.DataFrame):
                    local = Path(tmp) / path
                    local.parent.mkdir(parents=True, exist_ok=True)
                    value.to_csv(local, index=False)
                    folder = str(Path(path).parent)
                    mlflow.log_artifact(str(local), None if folder == "." else folder)
                else:
                    mlflow.log_dict(value, path)


@contextlib.contextmanager
def task_run(
    name: str,
    tags: dict[str, str],
    config: Any,
    inputs: Mapping[str, tuple[pd.DataFrame, str]],
    pretrained: Mapping | None = None,
    **extra_params: Any,
) -> Iterator[TaskRun]:
    """A task's child run under the pipeline's run, with its data as dataset inputs
    ({name: (table, context)}), the model it starts from (`log_model_input`) and its
    hyperparameters (`config` and `extra_params`) logged."""
    with child_run(name, tags) as run_id:
        for input_name, (frame, context) in inputs.items():
            log_frame_input(frame, input_name, context)
        if pretrained is not None:
            log_model_input(pretrained)
        log_config(config, **extra_params)
        yield TaskRun(run_id)


# ---------------------------------------------------------------------------- standalone runs


def open_run(experiment: str, uri: str | None, params: Mapping[str, Any]) -> str:
    """A new run in `experiment` with `params` (for the distributed entry point when no
    pipeline run is given); its owner ends it with `close_run`."""
    if uri:
        mlflow.set_tracking_uri(uri)
    experiment_id = mlflow.set_experiment(experiment).experiment_id
    mark_experiment(experiment_id)
    client = mlflow.MlflowClient()
    run_id = client.create_run(experiment_id).info.run_id
    entries = [mlflow.entities.Param(k, str(v)) for k, v in sorted(params.items())]
    client.log_batch(run_id, params=entries)
    return run_id


def close_run(run_id: str, status: str) -> None:
    mlflow.MlflowClient().set_terminated(run_id, status)
