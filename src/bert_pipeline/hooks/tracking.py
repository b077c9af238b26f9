"""The MLflow tracking store: created under a lock, the experiment marked as model training,
runs of killed processes marked, and each pipeline run described."""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from kedro.framework.hooks import hook_impl

PID_TAG, HOST_TAG = "bert_pipeline.pid", "bert_pipeline.host"


class TrackingHooks:
    """The MLflow store created safely, the experiment's kind set, runs of killed processes
    marked as such, and a description of what ran on each pipeline run."""

    @hook_impl(tryfirst=True)  # before kedro-mlflow touches the store
    def after_context_created(self, context) -> None:
        create_tracking_store(context.config_loader["mlflow"]["server"]["mlflow_tracking_uri"])
        import mlflow

        # CPU, memory (and GPU) every 10 s under system/*; off with
        # MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=false
        if os.environ.get("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "true").lower() != "false":
            mlflow.enable_system_metrics_logging()

    @hook_impl(trylast=True)  # after kedro-mlflow has opened this run
    def before_pipeline_run(self) -> None:
        import mlflow

        from bert_pipeline.tracking import mark_experiment

        mark_killed_runs()
        run = mlflow.active_run()
        if run is not None:  # existing experiments too, not only new ones
            mark_experiment(run.info.experiment_id)

    @hook_impl(tryfirst=True)  # before kedro-mlflow ends this run
    def after_pipeline_run(self, run_params: dict) -> None:
        from bert_pipeline.tracking import describe_pipeline_run

        describe_pipeline_run(run_command(run_params))


def run_command(run_params: dict) -> str:
    """The `kedro run` that made the run, from Kedro's run parameters."""
    words = ["kedro", "run"]
    for key, flag in (("pipeline_names", "--pipelines"), ("namespaces", "--namespaces")):
        if run_params.get(key):
            words += [flag, ",".join(run_params[key])]
    if run_params.get("env"):
        words += ["--env", run_params["env"]]
    return f"`{' '.join(words)}`"


def create_tracking_store(uri: str) -> None:
    """Creates a SQLite tracking store under an exclusive lock: two runs starting together would
    otherwise both create its tables (`table runs already exists`)."""
    if not uri.startswith("sqlite:///"):
        return
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


def mark_killed_runs() -> None:
    """Tags this run with its process; marks KILLED the RUNNING runs whose process is gone."""
    import mlflow

    from bert_pipeline.tracking import child_runs

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
        children = child_runs(run.info.experiment_id, other.info.run_id, status="RUNNING")
        for dead in [*children, other]:  # a GLUE task's child run died with its parent
            client.set_terminated(dead.info.run_id, "KILLED")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
