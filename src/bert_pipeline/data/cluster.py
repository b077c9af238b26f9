"""The Dask cluster the data stages run on, and computing on it with progress and clear errors.

`open_client` starts an embedded `LocalCluster` (workers, threads and memory limit from the
parameters `pretrain_data.dask`) or connects to a running scheduler (`dask scheduler` +
`dask worker` on several machines, or dask-jobqueue's `SLURMCluster`) by address. The client
becomes Dask's default scheduler in this process, so every `compute` of the data stages runs on
it; the stages themselves only build Dask collections.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import dask

logger = logging.getLogger(__name__)

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
_KEYS = {
    "scheduler_address",
    "n_workers",
    "threads_per_worker",
    "memory_limit",
    "connect_timeout",
    "dashboard",
    "allowed_failures",
}


class ClusterError(RuntimeError):
    """The cluster cannot be reached, or a worker died on a partition."""


def open_client(params: dict[str, Any]):
    """A `distributed.Client` for the data stages, from the parameters `pretrain_data.dask`."""
    from distributed import Client, LocalCluster

    unknown = set(params) - _KEYS
    if unknown:
        raise ClusterError(f"unknown parameter(s) pretrain_data.dask.{sorted(unknown)}")
    dask.config.set(
        {
            "distributed.scheduler.allowed-failures": int(params.get("allowed_failures", 0)),
            "logging.distributed": "warning",  # start/stop chatter of every worker and comm
            # the same for the worker processes, which read it when they import distributed
            "distributed.nanny.pre-spawn-environ.DASK_LOGGING__DISTRIBUTED": "warning",
        }
    )
    logging.getLogger("distributed").setLevel(logging.WARNING)
    address = params.get("scheduler_address") or os.environ.get(SCHEDULER_ENV)
    if address:
        timeout = params.get("connect_timeout", "10s")
        try:
            client = Client(address, timeout=timeout, set_as_default=True)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(
                f"no Dask scheduler answers at pretrain_data.dask.scheduler_address={address!r} "
                f"(or ${SCHEDULER_ENV}) within {timeout}: {type(exc).__name__}"
            ) from None
        logger.info("Dask: connected to %s (%d workers)", address, len(client.nthreads()))
        return client
    n_workers = params.get("n_workers") or os.cpu_count() or 1
    cluster = LocalCluster(
        n_workers=int(n_workers),
        threads_per_worker=int(params.get("threads_per_worker", 1)),
        memory_limit=params.get("memory_limit", "auto"),
        processes=True,
        dashboard_address=":0" if params.get("dashboard") else None,
        # one core per worker thread: the Rust tokenizer's own thread pool would oversubscribe
        env={"TOKENIZERS_PARALLELISM": "false", "DASK_LOGGING__DISTRIBUTED": "warning"},
    )
    client = Client(cluster, set_as_default=True)
    link = f", dashboard {client.dashboard_link}" if params.get("dashboard") else ""
    logger.info("Dask: LocalCluster with %d worker(s)%s", int(n_workers), link)
    return client


def compute(stage: str, tasks: Sequence[Any], names: Sequence[str] | None = None) -> list[Any]:
    """Computes `tasks` (Dask collections or delayed objects) on the default scheduler.

    With a distributed client a text progress bar shows the stage's progress, and a task that
    killed its worker (out of memory, segfault) or raised becomes one error naming the stage
    and the partition (`names[i]` for task i).
    """
    from distributed import KilledWorker, get_client, progress, wait

    try:
        client = get_client()
    except ValueError:
        return list(dask.compute(*tasks))
    futures = client.compute(list(tasks))
    logger.info("%s: %d partition(s) on %d worker(s)", stage, len(futures), len(client.nthreads()))
    try:
        progress(futures, notebook=False)
        wait(futures)
        failed = [i for i, f in enumerate(futures) if f.status == "error"]
        if not failed:
            return client.gather(futures)
        where = ", ".join(str(names[i] if names else i) for i in failed[:5])
        exc = futures[failed[0]].exception()
        if isinstance(exc, KilledWorker):
            raise ClusterError(
                f"{stage}: a worker died while computing partition(s) {where} (killed, or over "
                "its memory limit pretrain_data.dask.memory_limit); the previous output is kept"
            )
        exc.add_note(f"in {stage}, partition(s) {where}")
        raise exc
    finally:
        client.cancel(futures)


def close_client(client) -> None:
    """Closes the client; an embedded LocalCluster is shut down, a remote one keeps running."""
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()
