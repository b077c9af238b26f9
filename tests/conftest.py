"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mlflow_store import new_store

# Under xdist each worker gets its share of the cores for torch, here and in the commands the
# tests start, as Dask's workers used to leak OMP_NUM_THREADS=1 into them: with every core in
# each of two workers, a fresh clone's suite took 12 min 23 s on the 2-core AMX Xeon, with one
# thread each 9 min 43 s and 10 min 11 s (idle). A test that needs torch's own choice unsets it.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _share = (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _share)))

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data beside the checkout; tests that need it skip on a fresh clone."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent (only present beside the team's checkouts and in CI)")
    return SHARED_DATA


@pytest.fixture
def mlflow_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A throw-away SQLite tracking store; conf/base/mlflow.yml reads MLFLOW_TRACKING_URI.

    kedro-mlflow marks its run finished but leaves it on mlflow's in-process run stack, so the
    next KedroSession in the same pytest process would try to log into it: pop it on teardown.
    """
    import mlflow

    uri = new_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ARTIFACT_LOCATION", (tmp_path / "mlartifacts").as_uri())
    mlflow.set_tracking_uri(uri)  # an earlier test's kedro-mlflow run set it for the process
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(None)
