"""`kedro run` with a short failure report and a `--verbose` switch.

A failed run prints what is wrong and where in a few lines; the chained tracebacks go to
logs/last_error.log, and to the console only with `--verbose`. `--verbose` also brings back
Kedro's per-dataset and per-node lines that conf/logging.yml leaves out.
Everything else is Kedro's own `run` command, options included.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click
from kedro.framework.cli.project import run as kedro_run
from kedro.framework.project import LOGGING

ERROR_LOG = Path("logs") / "last_error.log"
MAX_LINES, MAX_WIDTH = 3, 200
# at WARNING in conf/logging.yml: "Loading data from ...", "Running node: ...", "Completed node"
KEDRO_DETAIL_LOGGERS = ("kedro.io.data_catalog", "kedro.pipeline.node", "kedro.runner")


def short_reason(exc: BaseException) -> str:
    """`Type: message`, the message cut to a few lines (Kedro's dataset errors take two)."""
    lines = [line[:MAX_WIDTH] for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: " + "\n  ".join(lines[:MAX_LINES] or ["(no message)"])


def _run(verbose: bool, **kwargs):
    if verbose:  # in the configuration, which the console hooks apply again
        for name in KEDRO_DETAIL_LOGGERS:
            LOGGING.data["loggers"][name] = {"level": "INFO"}
        LOGGING.configure(LOGGING.data)
    try:
        check_parameters_first(kwargs)
        return kedro_run.callback(**kwargs)
    except Exception as exc:
        if verbose:
            raise
        ERROR_LOG.parent.mkdir(exist_ok=True)
        ERROR_LOG.write_text(traceback.format_exc(), encoding="utf-8")
        click.secho(f"Error: {short_reason(exc)}", fg="red", err=True)
        click.echo(f"Full traceback: {ERROR_LOG}, or run again with --verbose.", err=True)
        sys.exit(1)


def check_parameters_first(kwargs: dict) -> None:
    """The run guard's parameter check, before Kedro opens a session: a refused run then costs
    no MLflow store, no lock and no import of every dataset class (kedro-mlflow loads them all
    when the catalog is made). The hook checks again for sessions made in Python. An unknown
    pipeline name is left to Kedro's own message."""
    from kedro.framework.project import pipelines
    from kedro.pipeline import Pipeline

    from bert_pipeline.hooks.run_guard import check_parameters
    from bert_pipeline.pipeline_registry import run_parameters

    names = [kwargs["pipeline"]] if kwargs.get("pipeline") else list(kwargs.get("pipelines") or [])
    if any(name not in pipelines for name in names):
        return
    selected = sum((pipelines[name] for name in names or ["__default__"]), Pipeline([])).filter(
        tags=tuple(kwargs.get("tags") or ()),
        from_nodes=kwargs.get("from_nodes"),
        to_nodes=kwargs.get("to_nodes"),
        node_names=tuple(kwargs.get("node_names") or ()),
        from_inputs=kwargs.get("from_inputs"),
        to_outputs=kwargs.get("to_outputs"),
        node_namespaces=kwargs.get("namespaces"),
    )
    parameters = run_parameters()

    def load(name: str) -> Any:
        value: Any = parameters
        for key in name.removeprefix("params:").split("."):
            value = (value or {}).get(key)
        return value

    check_parameters(selected, load, kwargs.get("env") or os.environ.get("KEDRO_ENV"))


run = click.Command(
    name="run",
    callback=_run,
    params=[
        *kedro_run.params,
        click.Option(
            ["--verbose"],
            is_flag=True,
            help="Print Kedro's per-dataset and per-node lines, and a failure's full traceback.",
        ),
    ],
    help=kedro_run.help,
    short_help=kedro_run.short_help,
)


@click.group(name="bert_pipeline")
def cli() -> None:
    """Project commands (they override Kedro's of the same name)."""


cli.add_command(run)
