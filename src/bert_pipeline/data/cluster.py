"""The Dask cluster the data stages run on, and computing on it with progress and clear errors.

`open_client` starts an embedded `LocalCluster` (workers, threads and memory limit from the
parameters `pretrain_data.dask`) or connects to a running scheduler (`dask scheduler` +
`dask worker` on several machines, or dask-jobqueue's `SLURMCluster`) by address. The client
becomes Dask's default scheduler in this process, so every `compute` of the data stages runs on
it; the stages themselves only build Dask collections.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask

from bert_pipeline.params import parse_params, require

logger = logging.getLogger(__name__)

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"

# Dask's nannies write their pre-spawn environment (OMP_NUM_THREADS=1, MKL_NUM_THREADS=1, ...,
# meant for the workers) into this process's os.environ before each worker starts. torch, which
# the training node imports after the data stages in the same `kedro run`, reads OMP_NUM_THREADS
# once and would train on one core: an hour of the budget recipe made about 28% fewer steps. The
# workers keep those values; this process gets back what it held, kept here between
# open_client and close_client.
_OWN_ENVIRON: dict[str, str | None] = {}


@dataclass
class DaskParams:
    """The `pretrain_data.dask` parameters."""

    scheduler_address: str | None = None  # a running scheduler; else an embedded LocalCluster
    n_workers: int | None = None  # LocalCluster worker processes; None: one per core
    threads_per_worker: int = 1
    memory_limit: str | int | float = "auto"  # per worker: "4GiB", bytes, a share of RAM, auto
    connect_timeout: str = "10s"
    dashboard: bool = False
    allowed_failures: int = 0  # retries of a task whose worker died
    # how LocalCluster starts its workers: fork (a copy of this process, ~0.1 s) or spawn (a
    # fresh interpreter importing pandas, dask and the stages, ~1.7 s a run); auto: fork on
    # Linux, spawn elsewhere (macOS's system libraries are not fork-safe)
    start_method: str = "auto"

    def check(self, root: str) -> None:
        require(
            not isinstance(self.memory_limit, str) or _is_size(self.memory_limit),
            root,
            "memory_limit",
            "must be auto, a size such as 4GiB, bytes or a share of the memory",
            self.memory_limit,
        )
        require(
            self.n_workers is None or self.n_workers >= 1,
            root,
            "n_workers",
            "must be >= 1 or null",
            self.n_workers,
        )
        require(
            self.threads_per_worker >= 1,
            root,
            "threads_per_worker",
            "must be >= 1",
            self.threads_per_worker,
        )
        methods = ("auto", *multiprocessing.get_all_start_methods())
        require(
            self.start_method in methods,
            root,
            "start_method",
            f"must be one of {list(methods)} on this platform",
            self.start_method,
        )
        require(
            self.allowed_failures >= 0,
            root,
            "allowed_failures",
            "must be >= 0",
            self.allowed_failures,
        )


def _is_size(text: str) -> bool:
    try:
        return text == "auto" or dask.utils.parse_bytes(text) >= 0
    except ValueError:
        return False


def dask_params(params: Mapping[str, Any] | None) -> DaskParams:
    return parse_params(DaskParams, params, "pretrain_data.dask")


def start_method(cfg: DaskParams) -> str:
    """The worker start method: `start_method`, auto being fork on Linux and spawn elsewhere."""
    if cfg.start_method != "auto":
        return cfg.start_method
    return "fork" if sys.platform.startswith("linux") else "spawn"


class ClusterError(RuntimeError):
    """The cluster cannot be reached, or a worker died on a partition."""


def open_client(params: Mapping[str, Any] | None):
    """A `distributed.Client` for the data stages, from the parameters `pretrain_data.dask`."""
    from distributed import Client, LocalCluster

    from bert_pipeline.data.worker_logging import QuietShutdown

    cfg = dask_params(params)
    dask.config.set(
        {
            "distributed.scheduler.allowed-failures": cfg.allowed_failures,
            # a worker busy with a shard gets no further shard reads queued behind it: Dask's
            # default (1.1) hands a 1-thread worker a second one, which work stealing never
            # moves (a read is short) and the shard built from it waits, while the other worker
            # idles (seen as ~1.4 s of one worker's idle time in a 6-shard run)
            "distributed.scheduler.worker-saturation": 1.0,
            "logging.distributed": "warning",  # start/stop chatter of every worker and comm
            # the same for the worker processes, which read it when they import distributed
            "distributed.nanny.pre-spawn-environ.DASK_LOGGING__DISTRIBUTED": "warning",
            # Dask sets MALLOC_TRIM_THRESHOLD_=65536 in its workers, which turns off glibc's
            # adaptive mmap threshold: every array over 128 KiB is then a fresh mmap whose pages
            # fault in again, and a shard's numpy work takes ~25% longer (benchmarks/data_scale.md)
            "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
            "distributed.worker.multiprocessing-method": start_method(cfg),
        }
    )
    logging.getLogger("distributed").setLevel(logging.WARNING)
    address = cfg.scheduler_address or os.environ.get(SCHEDULER_ENV)
    if address:
        try:
            client = Client(address, timeout=cfg.connect_timeout, set_as_default=True)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(
                f"no Dask scheduler answers at pretrain_data.dask.scheduler_address={address!r} "
                f"(or ${SCHEDULER_ENV}) within {cfg.connect_timeout}: {type(exc).__name__}"
            ) from None
        logger.info("Dask: connected to %s (%d workers)", address, len(client.nthreads()))
        return client
    n_workers = cfg.n_workers or os.cpu_count() or 1
    before = dict(os.environ)
    try:
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=cfg.threads_per_worker,
            memory_limit=cfg.memory_limit,
            processes=True,
            dashboard_address=":0" if cfg.dashboard else None,
            # the stages' imports (dask.dataframe, pandera: ~1 s) while the worker starts, not
            # when its first task arrives
            preload=["bert_pipeline.data.stages"],
            # one core per worker thread: the Rust tokenizer's own thread pool would oversubscribe
            env={"TOKENIZERS_PARALLELISM": "false", "DASK_LOGGING__DISTRIBUTED": "warning"},
        )
    finally:
        keys = set(os.environ) | set(before)
        written = {k: before.get(k) for k in keys if os.environ.get(k) != before.get(k)}
        logger.debug("put back after the workers started: %s", sorted(written))
        _OWN_ENVIRON.update(written)
        _restore(written)
    client = Client(cluster, set_as_default=True)
    client.register_plugin(QuietShutdown(), name=QuietShutdown.name)
    link = f", dashboard {client.dashboard_link}" if cfg.dashboard else ""
    logger.info("Dask: LocalCluster with %d worker(s)%s", n_workers, link)
    return client


def compute(stage: str, tasks: Sequence[Any], names: Sequence[str] | None = None) -> list[Any]:
    """Computes `tasks` (Dask collections or delayed objects) on the default scheduler.

    With a distributed client a text progress bar shows the stage's progress, and a task that
    killed its worker (out of memory, segfault) or raised becomes one error naming the stage
    and the partition (`names[i]` for task i).
    """
    from distributed import KilledWorker, get_client

    try:
        client = get_client()
    except ValueError:
        return list(dask.compute(*tasks))
    futures = client.compute([_fused(t) for t in tasks])
    logger.info("%s: %d partition(s) on %d worker(s)", stage, len(futures), len(client.nthreads()))
    try:
        _wait_with_progress(stage, client, futures)
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


def _fused(task: Any) -> Any:
    """A Dask DataFrame collection with its graph optimized: Client.compute does not fuse it, so
    a chain of per-partition steps (read, convert, validate, write) would run as a task per step,
    each waiting for a scheduler round trip. Delayed objects are left as they are."""
    import dask.dataframe as dd

    return task.optimize() if isinstance(task, dd.DataFrame | dd.Series | dd.Scalar) else task


# How often the progress bar asks the scheduler how far a stage is: a stage ends when its bar
# hears so, and with distributed's default (100 ms) that was ~50 ms (up to 100 ms) after its last
# task: ~0.2 s of a 6 s run
PROGRESS_POLL_S = 0.02
PROGRESS_DRAW_S = 0.1  # the console line is redrawn at most this often
# How long a bar may still take to hear that its stage's futures are done
PROGRESS_GRACE_S = 5.0


def _wait_with_progress(stage: str, client, futures: Sequence[Any]) -> None:
    """Waits for `futures` to finish or fail, with distributed's console progress bar.

    The bar runs on the client's event loop beside the wait, and the stage keeps its futures
    until the bar has heard the end from the scheduler, whose progress plugin would otherwise
    wait for ever for keys already released. Once, under heavy load, a run sat inside the bar
    with both workers idle (cause unknown): a bar still deaf `PROGRESS_GRACE_S` after the
    futures are done is dropped, and the stage goes on. If the scheduler had not set the bar's
    plugin up by then, that plugin waits until the cluster closes, which logs its cancellation:
    a traceback at the end of the data stages instead of a run that never ends."""
    from distributed import wait
    from distributed.diagnostics.progressbar import TextProgressBar

    class StageBar(TextProgressBar):
        drawn = 0.0

        def _draw_bar(self, remaining, all, **kwargs):
            if remaining and self.elapsed - self.drawn < PROGRESS_DRAW_S:
                return
            self.drawn = self.elapsed
            super()._draw_bar(remaining, all, **kwargs)

    bar = StageBar(futures, interval=PROGRESS_POLL_S, start=False)

    async def start() -> asyncio.Task:
        return asyncio.ensure_future(bar.listen())

    async def finish(listening: asyncio.Task, grace: float) -> None:
        try:
            await asyncio.wait_for(listening, grace)  # cancels it on timeout
        except Exception as exc:  # TimeoutError, or the bar's own error
            if grace:
                logger.warning("%s: done, its progress bar dropped (%r)", stage, exc)
            if getattr(bar, "comm", None) is not None:
                bar.comm.abort()
            if hasattr(bar, "_last_response"):
                bar._draw_stop()  # its line cleared, as at its own end

    listening = client.sync(start)
    try:
        wait(futures)
    finally:
        grace = PROGRESS_GRACE_S if all(f.done() for f in futures) else 0.0  # 0: interrupted
        try:
            client.sync(finish, listening, grace, callback_timeout=grace + 5)
        except Exception as exc:  # a closed client: the stage's own outcome still counts
            logger.debug("%s: progress bar not finished: %r", stage, exc)


def close_client(client) -> None:
    """Closes the client; an embedded LocalCluster is shut down, a remote one keeps running."""
    cluster = getattr(client, "cluster", None)
    try:
        client.close()
        if cluster is not None:
            cluster.close()
    finally:
        _restore(_OWN_ENVIRON)  # a nanny that restarted a dead worker wrote its values again
        _OWN_ENVIRON.clear()


def _restore(values: Mapping[str, str | None]) -> None:
    """Sets these variables of os.environ (None: unset)."""
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
