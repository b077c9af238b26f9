"""Project hooks: runs that refuse at once, and the Dask cluster of the data stages.

`RunGuardHooks` runs before anything else: it takes the `data_dir` lock (a second run into the
same folder is refused in one line), parses every parameter the selected nodes will receive into
its typed object (errors name the parameter path) and checks that the models the pipeline reads
exist, so no node runs and nothing is saved when a later node would fail on its inputs.
`DaskClusterHooks` opens the Dask client for the nodes tagged `dask` and closes it after them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from bert_pipeline.data.cluster import close_client, open_client
from bert_pipeline.runlock import RunLock

DASK_TAG = "dask"
DASK_PARAMS = "params:pretrain_data.dask"


def _tokenizer_params(params: dict[str, Any]) -> Any:
    from bert_pipeline.data.tokenizer import TokenizerParams
    from bert_pipeline.training.config import parse_params

    return parse_params(TokenizerParams, params, "pretrain_data.tokenizer")


def _example_params(params: dict[str, Any]) -> Any:
    from bert_pipeline.pipelines.pretrain_data.nodes import example_config

    return example_config(params)


def _training_params(params: dict[str, Any]) -> Any:
    from bert_pipeline.training.config import TrainingConfig

    return TrainingConfig.from_params(params)


# every parameter entry a node receives -> the parser its node will apply
PARAMETER_PARSERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "params:pretrain_data.tokenizer": _tokenizer_params,
    "params:pretrain_data.examples": _example_params,
    "params:pretrain_model": _training_params,
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
    def after_context_created(self, context) -> None:
        """The GLUE namespaces are built from the conf folder and env this run uses."""
        from bert_pipeline.pipelines.finetune_glue import pipeline as glue

        glue.ACTIVE_CONF.update(source=context.config_loader.conf_source, env=context.env)

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        runtime = run_params.get("runtime_params") or {}
        data_dir = Path(str(runtime.get("data_dir", "data"))).resolve()
        self._lock = RunLock(data_dir, "data_dir").acquire()
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
        from bert_pipeline.pipelines.finetune_glue import pipeline as glue

        glue.ACTIVE_CONF.clear()
        if self._lock is not None:
            lock, self._lock = self._lock, None
            lock.release()


class TrackingHooks:
    """The MLflow store created safely, and runs of killed processes marked as such."""

    @hook_impl(tryfirst=True)  # before kedro-mlflow touches the store
    def after_context_created(self, context) -> None:
        create_tracking_store(context.config_loader["mlflow"]["server"]["mlflow_tracking_uri"])
        import os

        import mlflow

        # CPU, memory (and GPU) every 10 s under system/*; MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING
        # =false turns it off
        if os.environ.get("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "true").lower() != "false":
            mlflow.enable_system_metrics_logging()

    @hook_impl(trylast=True)  # after kedro-mlflow has opened this run
    def before_pipeline_run(self) -> None:
        mark_killed_runs()


def create_tracking_store(uri: str) -> None:
    """Creates a SQLite tracking store under an exclusive lock: two runs starting together would
    otherwise both create its tables (`table runs already exists`)."""
    if not uri.startswith("sqlite:///"):
        return
    import fcntl
    import os

    from mlflow.tracking import MlflowClient

    database = Path(uri.removeprefix("sqlite:///"))
    database.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(database, os.O_RDWR | os.O_CREAT, 0o644)  # an empty file is an empty database
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        MlflowClient(uri).search_experiments(max_results=1)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


PID_TAG, HOST_TAG = "bert_pipeline.pid", "bert_pipeline.host"


def mark_killed_runs() -> None:
    """Tags this run with its process; marks KILLED the RUNNING runs whose process is gone."""
    import os
    import socket

    import mlflow

    run = mlflow.active_run()
    if run is None:
        return
    host = socket.gethostname()
    mlflow.set_tags({PID_TAG: os.getpid(), HOST_TAG: host})
    client = mlflow.MlflowClient()
    stale = client.search_runs(
        [run.info.experiment_id],
        filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'",
    )
    for other in stale:
        pid = int(other.data.tags.get(PID_TAG, 0))
        if other.info.run_id == run.info.run_id or not pid or _alive(pid):
            continue
        children = client.search_runs(
            [run.info.experiment_id],
            filter_string=f"attributes.status = 'RUNNING' and "
            f"tags.`mlflow.parentRunId` = '{other.info.run_id}'",
        )
        for dead in [*children, other]:  # a GLUE task's child run died with its parent
            client.set_terminated(dead.info.run_id, "KILLED")


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_run(pipeline, catalog, env: str | None) -> None:
    """Every typed parameter parsed, the GLUE tasks those of `env`, the models it reads there."""
    inputs = pipeline.inputs()
    for name, parse in PARAMETER_PARSERS.items():
        if name in inputs:
            parse(catalog.load(name))
    if "params:finetune_glue" in inputs:
        from bert_pipeline.pipelines.finetune_glue.nodes import task_configs

        params = catalog.load("params:finetune_glue")
        built = sorted({n.namespace for n in pipeline.nodes if n.namespace})
        configured = sorted(params.get("tasks") or [])
        missing = sorted(set(built) - set(configured))
        if missing:
            raise ValueError(
                f"the finetune_glue pipeline was built for task(s) {missing} that "
                f"finetune_glue.tasks={configured} of env {env!r} does not list; set "
                "KEDRO_ENV to the env you run or list them there"
            )
        task_configs(built, params)
    from bert_pipeline.model.checkpoint import check_weights

    for name, hint in MODEL_INPUTS.items():
        if name not in inputs:
            continue
        path = _where(catalog, name)
        if not catalog.exists(name):
            raise FileNotFoundError(f"{name} ({path}) does not exist; {hint}")
        try:
            check_weights(path)
        except ValueError as exc:
            raise ValueError(f"{name} ({hint}): {exc}") from None
    check_free_inputs(inputs - set(MODEL_INPUTS), catalog)


def _where(catalog, name: str) -> str:
    described = catalog.get(name)._describe()
    return str(described.get("path") or described.get("filepath") or "?")


def check_free_inputs(names: set[str], catalog) -> None:
    """Every other dataset the selected nodes read without making it exists now (a run started
    with --from-nodes would otherwise fail when it first loads one, after the nodes before)."""
    from kedro.io import AbstractDataset

    missing = []
    for name in sorted(n for n in names if not n.startswith("params:") and n != "parameters"):
        dataset = catalog.get(name)
        if dataset is None or type(dataset)._exists is AbstractDataset._exists:
            continue  # a dataset that cannot tell (the corpus reader): its node reports it
        if not catalog.exists(name):
            missing.append(f"{name} ({_where(catalog, name)})")
    if missing:
        raise FileNotFoundError(
            f"the selected nodes read {', '.join(missing)}, which no selected node makes and "
            "which do not exist; run the nodes that make them first (start earlier with "
            "--from-nodes, or the whole pipeline)"
        )


class DaskClusterHooks:
    """Opens the Dask client before the first node tagged `dask` (workers, memory limit or a
    scheduler address from `pretrain_data.dask`) and closes it before any other node, so
    training never shares the machine with idle Dask workers."""

    def __init__(self) -> None:
        self._client: Any = None

    @hook_impl
    def before_node_run(self, node, catalog) -> None:
        if DASK_TAG in node.tags:
            if self._client is None:
                self._client = open_client(catalog.load(DASK_PARAMS))
        else:
            self._close()

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._close()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            close_client(client)
