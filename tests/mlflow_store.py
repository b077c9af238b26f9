"""Throw-away MLflow SQLite stores for tests, copied from one store whose tables are made.

Making a store's tables runs MLflow's schema migrations, about 2 s of a test worker each, paid
by some fifty tests; a copy costs milliseconds. The README's first command (the `pretrained`
fixture of tests/test_readme_commands.py) and two runs making one store together
(tests/test_run_guards.py) make theirs as a user's first run does.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import sqlite3
import tempfile
from pathlib import Path

DATABASE = "mlflow.db"


@functools.cache
def _made_tables() -> Path:
    from bert_pipeline.hooks.tracking import create_tracking_store

    folder = Path(tempfile.mkdtemp(prefix="mlflow-tables-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    create_tracking_store(f"sqlite:///{folder / DATABASE}")  # as a run's hook makes its store
    return folder / DATABASE


def new_store(folder: Path) -> str:
    """The tracking URI of `folder`/mlflow.db, made there unless a run of this test already did;
    MLflow's Default experiment keeps its artifacts under `folder`, not where the copy was made."""
    database = folder / DATABASE
    if not database.exists():
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_made_tables(), database)
        with sqlite3.connect(database) as connection:
            connection.execute(
                "UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                (str(folder / "mlruns" / "0"),),
            )
        connection.close()
    return f"sqlite:///{database}"
