"""A data run imports no torch before its first node: kedro-mlflow builds every catalog entry at
the start of each run and the run guard checks every run, and either would otherwise pay torch's
import (~1.3 s) for nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

bootstrap_project(sys.argv[1])
with KedroSession.create(project_path=sys.argv[1]) as session:
    catalog = session.load_context().catalog
    types = {type(dataset).__name__ for _, dataset in catalog.items()}
    from kedro.framework.project import pipelines

    from bert_pipeline.hooks.run_guard import check_run

    check_run(pipelines["pretrain_data"], catalog, None)
print(len(types), "torch" in sys.modules)
"""


def test_the_catalog_and_the_run_guard_of_a_data_run_need_no_torch(tmp_path: Path):
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    n_types, torch_imported = done.stdout.split()[-2:]
    assert int(n_types) >= 10  # the checkpoint and tensor datasets among them
    assert torch_imported == "False"
