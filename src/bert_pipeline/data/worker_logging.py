"""Logging in the embedded LocalCluster's workers, which print to this run's console."""

from __future__ import annotations

import logging

from distributed import WorkerPlugin
from distributed.core import Status

HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat"


class QuietShutdown(WorkerPlugin):
    """Keeps a closing worker's own heartbeat failure off the console.

    A heartbeat in flight when `Worker.close` shuts the worker's connection pool fails with
    "ConnectionPool closing.", and distributed logs that at ERROR with a traceback, after the
    stage has finished well (one CI run in many). The same failure while the worker runs still
    shows."""

    name = "bert-pipeline-quiet-shutdown"

    def setup(self, worker) -> None:
        logging.getLogger("distributed.worker").addFilter(ClosingHeartbeatFilter(worker))


class ClosingHeartbeatFilter(logging.Filter):
    """Drops `worker`'s heartbeat-failure records once it is closing."""

    def __init__(self, worker) -> None:
        super().__init__()
        self.worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        closing = self.worker.status in (Status.closing, Status.closed)
        return not (closing and str(record.msg).startswith(HEARTBEAT_FAILED))
