"""Runs that refuse at once: the `data_dir` lock, every parameter parsed, every input there.

Before the first node, `RunGuardHooks` takes the `data_dir` lock (a second run into the same
folder is refused in one line), parses every parameter the selected nodes will receive with the
parser its node applies (errors name the parameter path), checks that the models the pipeline
reads exist and load, and that every other input no selected node makes is already there. So no
node runs and nothing is saved when a later node would fail on its inputs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from bert_pipeline.hooks.dask_cluster import hook_parameters
from bert_pipeline.runlock import RunLock

# every parameter entry a node (or a hook) receives -> "module:function", the parser it applies
_DATA_NODES = "bert_pipeline.pipelines.pretrain_data.nodes"
PARAMETER_PARSERS = {
    "params:pretrain_data.dask": "bert_pipeline.data.cluster:dask_params",
    "params:pretrain_data.tokenizer": f"{_DATA_NODES}:tokenizer_config",
    "params:pretrain_data.examples": f"{_DATA_NODES}:example_config",
    "params:pretrain_model": "bert_pipeline.training.config:TrainingConfig.from_params",
    "params:finetune_ner": "bert_pipeline.ner.config:ner_params",
    "params:finetune_squad": "bert_pipeline.squad.config:squad_params",
    "params:finetune_swag": "bert_pipeline.swag.config:swag_params",
}
# models a pipeline may read without making them: they must exist before it starts
MODEL_INPUTS = {
    "glue_pretrained_model": "runtime parameter glue_model_dir",
    "tokenizer": "run the pretrain_data pipeline first",
    "pretraining_examples": "run the pretrain_data pipeline first",
}


class RunGuardHooks:
    """Lock, parameters and inputs checked before the first node (see the module docstring)."""

    def __init__(self) -> None:
        self._lock: RunLock | None = None

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        self._lock = RunLock(run_data_dir(run_params), "data_dir").acquire()
        try:
            check_run(pipeline, catalog, run_params.get("env"))
        except BaseException:
            self._release()
            raise

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._release()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            lock, self._lock = self._lock, None
            lock.release()


def run_data_dir(run_params: dict[str, Any]) -> Path:
    """The run's output folder: the runtime parameter `data_dir` (default `data`)."""
    runtime = run_params.get("runtime_params") or {}
    return Path(str(runtime.get("data_dir", "data"))).resolve()


def _parser(path: str):
    module, _, attribute = path.partition(":")
    value: Any = importlib.import_module(module)
    for name in attribute.split("."):
        value = getattr(value, name)
    return value


def check_run(pipeline, catalog, env: str | None) -> None:
    """Every typed parameter parsed, the GLUE tasks those of `env`, the models it reads there."""
    check_parameters(pipeline, catalog.load, env)
    inputs = pipeline.inputs()
    if "params:pretrain_model" in inputs:
        check_resume(catalog.load("params:pretrain_model"))
    check_models(inputs, catalog)
    check_made_inputs(inputs - set(MODEL_INPUTS), catalog)


def check_parameters(pipeline, load: Callable[[str], Any], env: str | None) -> None:
    """Every `params:` input of the pipeline's nodes (and of the hooks that serve them) parsed as
    its user parses it; `load` gives a value (the catalog's, or the configuration's before a
    session exists)."""
    inputs = pipeline.inputs() | hook_parameters(pipeline)
    for name, parser in PARAMETER_PARSERS.items():
        if name in inputs:
            _parser(parser)(load(name))
    if "params:finetune_glue" in inputs:
        check_glue_tasks(pipeline, load("params:finetune_glue"), env)


def check_resume(params: dict[str, Any]) -> None:
    """`resume` names a readable checkpoint, or `pretrain` would run its data nodes first and
    only then refuse to continue a run that is not there."""
    from bert_pipeline.training.config import TrainingConfig

    cfg = TrainingConfig.from_params(params)
    if cfg.resume:  # the check imports torch and Lightning: only when resuming
        from bert_pipeline.training.trainer import resolve_resume

        resolve_resume(cfg)


def check_glue_tasks(pipeline, params: dict[str, Any], env: str | None) -> None:
    """The namespaces were built from the configuration of this run, and each task's settings
    parse (the pipeline is built from `finetune_glue.tasks` of the env the command line names)."""
    from bert_pipeline.glue.config import glue_params

    glue = glue_params(params)
    built = sorted({n.namespace for n in pipeline.nodes if n.namespace})
    missing = sorted(set(built) - set(glue.tasks))
    if missing:
        raise ValueError(
            f"the finetune_glue pipeline was built for task(s) {missing} that "
            f"finetune_glue.tasks={sorted(glue.tasks)} of env {env!r} does not list; set "
            "KEDRO_ENV to the env you run or list them there"
        )
    glue.task_configs(built)


def check_models(inputs: set[str], catalog) -> None:
    """The models the run reads without making them exist and their weights are readable."""
    recover_data_set(inputs, catalog)
    for name, hint in MODEL_INPUTS.items():
        if name not in inputs:
            continue
        # torch, only for a run that reads a model: a data run never imports it
        from bert_pipeline.model.checkpoint import check_weights

        path = dataset_path(catalog, name)
        if not catalog.exists(name):
            raise FileNotFoundError(f"{name} ({path}) does not exist; {hint}")
        try:
            check_weights(path)
        except ValueError as exc:
            raise ValueError(f"{name} ({hint}): {exc}") from None
    check_examples(inputs, catalog)


def recover_data_set(inputs: set[str], catalog) -> None:
    """Completes or undoes what a killed `pretrain_data` run left of the data set this run
    reads (a commit or a folder swap cut short), before anything checks that it exists."""
    from bert_pipeline.hooks.data_transaction import data_set

    names, staged = data_set(catalog)
    if inputs & names:
        staged.recover()


def check_examples(inputs: set[str], catalog) -> None:
    """The examples the run reads match their manifest, and their statistics report is theirs
    (loading checks the manifest against the shards' Arrow metadata: no data is read)."""
    if "pretraining_examples" not in inputs:
        return
    examples = catalog.load("pretraining_examples")
    report = "pretrain_data_statistics"
    if report in inputs and catalog.exists(report):
        examples.check_statistics(catalog.load(report), dataset_path(catalog, report))


def dataset_path(catalog, name: str) -> str:
    """Where a dataset lives, from the catalog's own configuration of it (that of the dataset an
    MLflow artifact wraps)."""
    config = catalog.config_resolver.resolve_pattern(name)
    if isinstance(config.get("dataset"), dict):
        config = config["dataset"]
    return str(config.get("path") or config.get("filepath") or "?")


def check_made_inputs(names: set[str], catalog) -> None:
    """Every input that some pipeline of the project makes exists now, when no selected node
    makes it (a run started with --from-nodes would otherwise fail when it first loads one,
    after the nodes before). Raw inputs are read and reported by their own nodes."""
    from kedro.framework.project import pipelines

    made = set().union(*(p.all_outputs() for p in pipelines.values()))
    missing = [
        f"{name} ({dataset_path(catalog, name)})"
        for name in sorted(names & made)
        if not catalog.exists(name)
    ]
    if missing:
        raise FileNotFoundError(
            f"the selected nodes read {', '.join(missing)}, which no selected node makes and "
            "which do not exist; run the nodes that make them first (start earlier with "
            "--from-nodes, or the whole pipeline)"
        )
