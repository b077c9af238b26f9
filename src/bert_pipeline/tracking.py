"""The project's one route into MLflow, importable without Kedro.

A pipeline's run is kedro-mlflow's; training writes its live metrics into it through the
Lightning logger (`bert_pipeline.training.core.mlflow_logger`). Everything else goes through
here: the run's dataset inputs, each fine-tuning task's child run (`task_run`: inputs, config,
best metrics and parameters, records, predictions, the model) and the distributed entry point's
own run when no pipeline opened one. Outside an MLflow run every call does nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd


def active_run() -> tuple[str | None, str | None]:
    """(run id, tracking URI) of the MLflow run kedro-mlflow opened, or (None, None)."""
    run = mlflow.active_run()
    if run is None:
        return None, None
    return run.info.run_id, mlflow.get_tracking_uri()


def tracking_uri() -> str:
    return mlflow.get_tracking_uri()


@contextlib.contextmanager
def child_run(name: str, tags: dict[str, str]) -> Iterator[str | None]:
    """A nested MLflow run under the active one (one per fine-tuning task); None if untracked."""
    if mlflow.active_run() is None:
        yield None
        return
    with mlflow.start_run(run_name=name, nested=True, tags=tags) as run:
        yield run.info.run_id


def log_config(config: Any, **extra: Any) -> None:
    """A task's hyperparameters (a dataclass) and `extra` as the active run's parameters."""
    if mlflow.active_run() is not None:
        values = {k: str(v) for k, v in dataclasses.asdict(config).items()}
        mlflow.log_params({**values, **{k: str(v) for k, v in extra.items()}})


def log_table_input(
    name: str, source: str, digest: str, rows: int, schema: Any, context: str = "training"
) -> None:
    """A dataset input of the active MLflow run (the run page's "Datasets"), without reading
    the data: name, local source, digest, Arrow schema as MLflow's and the row count."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.types.schema import Array, ColSpec, DataType, Schema

    if mlflow.active_run() is None:
        return

    def spec(field: Any) -> ColSpec:
        kind = field.type
        if hasattr(kind, "value_type"):  # list<int> token ids
            return ColSpec(Array(DataType.long), field.name)
        name = "string" if "string" in str(kind) else "long"
        return ColSpec(DataType[name], field.name)

    dataset = MetaDataset(
        source=resolve_dataset_source(str(source)),
        name=name,
        digest=digest[:32],
        schema=Schema([spec(f) for f in schema]),
    )
    mlflow.log_input(dataset, context=context, tags={"rows": str(rows)})


def log_frame_input(frame: pd.DataFrame, name: str, context: str = "training") -> None:
    """A pandas table as a dataset input of the active MLflow run (schema, digest, row count)."""
    if mlflow.active_run() is not None:
        mlflow.log_input(mlflow.data.from_pandas(frame, name=name), context=context)


def log_model(checkpoint: dict, example: pd.DataFrame, **kwargs: Any) -> dict[str, Any]:
    """A checkpoint value as a (registered) pyfunc model of the active run
    (`bert_pipeline.serving`); what was logged, for the run's reports."""
    from bert_pipeline.serving import log_checkpoint_model

    return log_checkpoint_model(checkpoint, example, **kwargs)


# ---------------------------------------------------------------------------- a task's run


@dataclasses.dataclass
class TaskRun:
    """One fine-tuning task's child run; `run_id` is None when nothing is tracked."""

    run_id: str | None

    def log_model(self, checkpoint: dict, example: pd.DataFrame, **kwargs: Any) -> dict | None:
        """The task's best model (see `log_model`); None when untracked."""
        return None if self.run_id is None else log_model(checkpoint, example, **kwargs)

    def log_results(
        self,
        metrics: Mapping[str, float],
        params: Mapping[str, Any],
        files: Mapping[str, dict | pd.DataFrame],
    ) -> None:
        """Best metrics and parameters, and files: a dict as JSON, a table as CSV, each at its
        artifact path (`predictions/dev_predictions.csv`)."""
        if self.run_id is None:
            return
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
    **extra_params: Any,
) -> Iterator[TaskRun]:
    """A task's child run under the pipeline's run, with its data as dataset inputs
    ({name: (table, context)}) and its hyperparameters (`config` and `extra_params`) logged."""
    with child_run(name, tags) as run_id:
        for input_name, (frame, context) in inputs.items():
            log_frame_input(frame, input_name, context)
        log_config(config, **extra_params)
        yield TaskRun(run_id)


# ---------------------------------------------------------------------------- standalone runs


def open_run(experiment: str, uri: str | None, params: Mapping[str, Any]) -> str:
    """A new run in `experiment` with `params` (for the distributed entry point when no
    pipeline run is given); its owner ends it with `close_run`."""
    if uri:
        mlflow.set_tracking_uri(uri)
    experiment_id = mlflow.set_experiment(experiment).experiment_id
    client = mlflow.MlflowClient()
    run_id = client.create_run(experiment_id).info.run_id
    entries = [mlflow.entities.Param(k, str(v)) for k, v in sorted(params.items())]
    client.log_batch(run_id, params=entries)
    return run_id


def close_run(run_id: str, status: str) -> None:
    mlflow.MlflowClient().set_terminated(run_id, status)
