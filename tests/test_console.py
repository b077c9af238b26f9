"""What a command prints and how fast it starts (a whole run's console: test_readme_commands)."""

from __future__ import annotations

import logging
import subprocess
import sys

from click.testing import CliRunner
from kedro.framework.project import LOGGING

from bert_pipeline import cli
from bert_pipeline.hooks.console import apply_logging_config, duration


def test_settings_import_no_heavy_library(project_root):
    """Every `kedro` command, `kedro --help` included, reads the settings and the hooks they
    register: torch, lightning, mlflow and dask load only when a run needs them (7-9 s)."""
    script = (
        "import sys\n"
        "import bert_pipeline.settings, bert_pipeline.cli\n"
        "heavy = ('torch', 'lightning', 'mlflow', 'kedro_mlflow', 'dask', 'pandas')\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=project_root, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]


def test_verbose_brings_back_kedros_dataset_and_node_lines(monkeypatch):
    """Off by default (conf/logging.yml); `kedro run --verbose` shows them, also after the
    console hooks apply the configuration again."""
    monkeypatch.setattr(LOGGING, "data", {**LOGGING.data, "loggers": dict(LOGGING.data["loggers"])})
    levels = {}

    def fake_run(**_):
        apply_logging_config()
        for name in cli.KEDRO_DETAIL_LOGGERS:
            levels[name] = logging.getLogger(name).getEffectiveLevel()

    monkeypatch.setattr(cli.kedro_run, "callback", fake_run)
    try:
        apply_logging_config()
        assert logging.getLogger("kedro.io.data_catalog").getEffectiveLevel() == logging.WARNING
        result = CliRunner().invoke(cli.cli, ["run", "--verbose"])
        assert result.exit_code == 0, result.output
        assert levels == dict.fromkeys(cli.KEDRO_DETAIL_LOGGERS, logging.INFO)
    finally:
        monkeypatch.undo()
        apply_logging_config()


def test_durations_read_at_a_glance():
    assert [duration(s) for s in (12.34, 245, 7380)] == ["12.3 s", "4 min 05 s", "2 h 03 min"]
