"""Project pipelines."""

from __future__ import annotations

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline


def register_pipelines() -> dict[str, Pipeline]:
    """`pretrain` is corpus -> examples (`pretrain_data`) followed by training (`pretrain_model`)."""
    pipelines = find_pipelines(raise_errors=True)
    pretrain = pipelines.get("pretrain_data", Pipeline([])) + pipelines.get(
        "pretrain_model", Pipeline([])
    )
    pipelines["pretrain"] = pretrain
    pipelines["__default__"] = pretrain
    return pipelines
