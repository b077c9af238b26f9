"""Kedro dataset: a dict of scalars as parameters of the pipeline's MLflow run."""

from __future__ import annotations

from typing import Any

from kedro.io.core import AbstractDataset


class MlflowParamsDataset(AbstractDataset[dict, dict]):
    """Saves `{name: value}` as the active MLflow run's parameters `<prefix>.<name>`: figures
    that are constant for a run (a data summary), where metrics would draw one-point charts.
    Loads them back from the active run; without a run, saving logs nothing.

    Example catalog entry::

        pretrain_data_summary:
          type: bert_pipeline.io.mlflow_params_dataset.MlflowParamsDataset
          prefix: pretrain_data
    """

    def __init__(self, prefix: str, metadata: dict[str, Any] | None = None):
        self._prefix = prefix
        self.metadata = metadata

    def save(self, data: dict) -> None:
        from bert_pipeline.tracking import log_params

        log_params({f"{self._prefix}.{k}": v for k, v in data.items()})

    def load(self) -> dict:
        from bert_pipeline.tracking import run_params

        start = f"{self._prefix}."
        return {k[len(start) :]: v for k, v in run_params().items() if k.startswith(start)}

    def _describe(self) -> dict[str, Any]:
        return {"prefix": self._prefix}
