"""The project's MLflow store is one file at the project root, wherever a command starts."""

from __future__ import annotations

import pytest
from kedro.framework.project import settings
from kedro.framework.startup import bootstrap_project


@pytest.mark.parametrize("folder", [".", "notebooks"])
def test_default_tracking_uri_is_the_database_at_the_project_root(
    project_root, monkeypatch, folder
):
    """A notebook kernel starts in notebooks/: a relative sqlite URI would open a new, empty
    store there (kedro-mlflow makes only scheme-less paths absolute)."""
    bootstrap_project(project_root)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(project_root / folder)
    loader = settings.CONFIG_LOADER_CLASS(
        conf_source=str(project_root / "conf"), **settings.CONFIG_LOADER_ARGS
    )
    uri = loader["mlflow"]["server"]["mlflow_tracking_uri"]
    assert uri == f"sqlite:///{(project_root / 'mlflow.db').as_posix()}"
