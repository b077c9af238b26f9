"""The console of a run: one line per node start and finish, and a summary at the end.

Kedro's own per-node and per-dataset lines are off in conf/logging.yml (`kedro run --verbose`
brings them back); these lines say the same in two per node, with the node's duration.
Libraries change logging when imported, after Kedro applied conf/logging.yml: kedro-mlflow
(with the plugins) sets its level, so the configuration is applied again once it is in
(lightning, imported by the training nodes, drops its own handler in `training.core`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from bert_pipeline.hooks.run_guard import dataset_path, run_data_dir

logger = logging.getLogger(__name__)

# The catalog layers whose datasets the summary lists as what the run made.
MADE_LAYERS = ("models", "reporting")
# The result a run is judged by, first found wins: on the pipeline's MLflow run, else on each
# of its child runs (a fine-tuning task's): GLUE average, masked-LM (or left-to-right LM)
# accuracy, a GLUE task's score, NER test F1, SQuAD dev F1.
HEADLINE_METRICS = (
    "glue.average",
    "val/mlm_accuracy",
    "val/ltr_accuracy",
    "best_score",
    "test_f1",
    "best_dev_f1",
)


def duration(seconds: float) -> str:
    """12.3 s, 4 min 05 s or 2 h 03 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class ConsoleHooks:
    """Logs each node's start and finish (with its duration) and the run's summary."""

    def __init__(self) -> None:
        self._ui: dict[str, Any] = {}
        self._start = 0.0
        self._total = 0
        self._nodes: dict[str, tuple[int, float]] = {}  # name: (number, start)
        self._unsaved: dict[str, set[str]] = {}  # name: outputs not saved yet

    @hook_impl(tryfirst=True)  # before kedro-mlflow's hook logs
    def after_context_created(self, context) -> None:
        apply_logging_config()
        self._ui = dict(context.config_loader["mlflow"].get("ui") or {})

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, pipeline) -> None:
        apply_logging_config()
        self._start, self._total = time.perf_counter(), len(pipeline.nodes)
        self._nodes, self._unsaved = {}, {}

    @hook_impl
    def before_node_run(self, node) -> None:
        number = len(self._nodes) + 1
        self._nodes[node.name] = (number, time.perf_counter())
        logger.info("node %d/%d %s started", number, self._total, node.name)

    @hook_impl
    def after_node_run(self, node) -> None:
        self._unsaved[node.name] = set(node.outputs)
        if not node.outputs:
            self._finish(node)

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, node) -> None:
        # a node is done when its outputs are saved: Dask computes them while saving
        unsaved = self._unsaved.get(node.name)
        if unsaved is not None:
            unsaved.discard(dataset_name)
            if not unsaved:
                del self._unsaved[node.name]
                self._finish(node)

    def _finish(self, node) -> None:
        number, start = self._nodes[node.name]
        elapsed = duration(time.perf_counter() - start)
        logger.info("node %d/%d %s done in %s", number, self._total, node.name, elapsed)

    @hook_impl(tryfirst=True)  # before kedro-mlflow ends the run the summary reads
    def after_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        data_dir = run_data_dir(run_params)
        name = ", ".join(run_params.get("pipeline_names") or ["__default__"])
        results, run = mlflow_lines(self._ui)
        lines = [
            # Kedro's own line, whose logger (kedro.runner) also says "Completed node" twice
            f"Pipeline execution completed in {duration(time.perf_counter() - self._start)}: "
            f"{len(pipeline.nodes)} node(s) of pipeline {name}",
            *results,
            *made_lines(pipeline, catalog, data_dir),
            f"Output folder: {data_dir}",
            *run,
        ]
        for line in lines:
            logger.info(line)


def apply_logging_config() -> None:
    """conf/logging.yml (with `--verbose`'s changes) over what libraries set when imported."""
    from kedro.framework.project import LOGGING

    LOGGING.configure(LOGGING.data)


def made_lines(pipeline, catalog, data_dir: Path) -> list[str]:
    """One line per layer of MADE_LAYERS: the files and folders of its datasets the pipeline
    made, relative to `data_dir` where they lie under it."""
    by_layer: dict[str, list[str]] = {}
    for name in sorted(pipeline.all_outputs()):
        config = catalog.config_resolver.resolve_pattern(name)
        layer = ((config.get("metadata") or {}).get("kedro-viz") or {}).get("layer")
        path = dataset_path(catalog, name)
        if layer in MADE_LAYERS and path != "?":
            resolved = Path(path).resolve()
            shown = resolved.relative_to(data_dir) if resolved.is_relative_to(data_dir) else path
            by_layer.setdefault(layer, []).append(str(shown))
    return [f"Made ({layer}): {', '.join(paths)}" for layer, paths in by_layer.items()]


def mlflow_lines(ui: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The headline metric(s), and the MLflow run with where to look at it; none without a run.

    The pipeline's run holds the headline metric, or each of its child runs (a fine-tuning
    task's) holds its own.
    """
    import mlflow

    from bert_pipeline.tracking import child_runs

    active = mlflow.active_run()
    if active is None:
        return [], []
    experiment_id, run_id = active.info.experiment_id, active.info.run_id
    parent = mlflow.MlflowClient().get_run(run_id)
    children = child_runs(experiment_id, run_id)
    results = []
    for run in [parent] if headline(parent.data.metrics) else children:
        found = headline(run.data.metrics)
        if found:
            label = "" if run is parent else f" ({run.info.run_name})"
            results.append(f"Result{label}: {found[0]} = {found[1]:.4g}")
    url = f"http://{ui.get('host', '127.0.0.1')}:{ui.get('port', '5000')}"
    return results, [
        f"MLflow run {run_id} in {mlflow.get_tracking_uri()}",
        f"  see it with `make mlflow-ui`, then {url}/#/experiments/{experiment_id}/runs/{run_id}"
        f"?{UI_WORKFLOW}",
    ]


# MLflow 3.17's UI opens every experiment in its GenAI view unless the link (or the user's toggle)
# names the model-training one; the experiment's kind tag alone does not switch it.
UI_WORKFLOW = "workflowType=machine_learning"


def headline(metrics: dict[str, float]) -> tuple[str, float] | None:
    """The first of HEADLINE_METRICS among `metrics`, with its value."""
    return next(((m, metrics[m]) for m in HEADLINE_METRICS if m in metrics), None)
