"""Project pipelines."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from kedro.framework.project import settings
from kedro.pipeline import Pipeline

from bert_pipeline.pipelines import (
    finetune_glue,
    finetune_ner,
    finetune_squad,
    finetune_swag,
    pretrain_data,
    pretrain_model,
)


def register_pipelines() -> dict[str, Pipeline]:
    """`pretrain` is corpus -> examples (`pretrain_data`) followed by training (`pretrain_model`).

    The pipelines are imported explicitly: Kedro 1.7's `find_pipelines` only imports the folders
    named on the command line, so a composed name such as `pretrain` would not be found.
    """
    glue = run_parameters().get("finetune_glue") or {}
    pipelines = {
        "pretrain_data": pretrain_data.create_pipeline(),
        "pretrain_model": pretrain_model.create_pipeline(),
        "finetune_glue": finetune_glue.create_pipeline(
            list(glue.get("tasks") or []), list(glue.get("init_from_mnli") or [])
        ),
        "finetune_ner": finetune_ner.create_pipeline(),
        "finetune_ner_features": finetune_ner.create_feature_pipeline(),
        "finetune_squad": finetune_squad.create_pipeline(),
        "finetune_swag": finetune_swag.create_pipeline(),
    }
    pipelines["pretrain"] = pipelines["pretrain_data"] + pipelines["pretrain_model"]
    pipelines["__default__"] = pipelines["pretrain"]
    return pipelines


def run_parameters() -> dict[str, Any]:
    """The parameters of the configuration this command runs with, read the way Kedro reads
    them (the project's settings: loader class, its arguments, conf source), for the structure
    that depends on them: the conf source, env and runtime parameters are those the kedro
    command line names (`--conf-source`, `--env`, `--params`), else $KEDRO_ENV and the
    project's conf folder."""
    context = click.get_current_context(silent=True)
    cli = context.params if context is not None else {}
    loader = settings.CONFIG_LOADER_CLASS(
        conf_source=str(cli.get("conf_source") or _project_conf()),
        env=cli.get("env") or os.environ.get("KEDRO_ENV"),
        runtime_params=cli.get("params") or None,
        **settings.CONFIG_LOADER_ARGS,
    )
    return loader["parameters"]


def _project_conf() -> Path:
    """The conf folder of the project being run (the working directory's), else this
    checkout's (the package imported from a source tree)."""
    here = Path.cwd() / settings.CONF_SOURCE
    return here if here.is_dir() else Path(__file__).resolve().parents[2] / settings.CONF_SOURCE
