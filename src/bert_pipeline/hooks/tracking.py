"""The MLflow tracking store: created under a lock, and runs of killed processes marked."""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from kedro.framework.hooks import hook_impl

PID_TAG, HOST_TAG = "bert_pipeline.pid", "bert_pipeline.host"


class TrackingHooks:
    """The MLflow store created safely, and runs of killed processes marked as such."""

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
        mark_killed_runs()


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
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
