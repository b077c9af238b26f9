"""The console's switches (a whole run's console: test_readme_commands; its start: test_layout)."""

from __future__ import annotations

import logging

from click.testing import CliRunner
from kedro.framework.project import LOGGING

from bert_pipeline import cli
from bert_pipeline.hooks.console import apply_logging_config, duration


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
