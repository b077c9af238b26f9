"""The console's switches (a whole run's console: test_readme_commands; its start: test_layout)."""

from __future__ import annotations

import logging

from click.testing import CliRunner
from kedro.framework.project import LOGGING

from bert_pipeline import cli
from bert_pipeline.hooks.console import apply_logging_config, duration


def test_verbose_brings_back_kedros_dataset_and_node_lines(monkeypatch, project_root):
    """Off by default (conf/logging.yml); `kedro run --verbose` shows them, also after the
    console hooks apply the configuration again."""
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(project_root)  # the command reads the pipelines, as under `kedro run`
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


def test_headline_is_the_pipeline_runs_or_each_child_runs(mlflow_uri):
    """GLUE's average on the pipeline's run; a task's score on its child run otherwise."""
    import mlflow

    from bert_pipeline.hooks.console import headline, mlflow_lines

    assert headline({"best_dev_f1": 80.0, "test_f1": 0.7, "epoch": 2}) == ("test_f1", 0.7)
    assert headline({"epoch": 2}) is None
    mlflow.set_experiment("console")  # not an earlier test's experiment id, unknown here
    with mlflow.start_run() as parent:
        with mlflow.start_run(run_name="glue_rte", nested=True):
            mlflow.log_metrics({"best_score": 0.625, "best_dev_accuracy": 0.625})
        results, run = mlflow_lines({"port": 5000})
        assert results == ["Result (glue_rte): best_score = 0.625"]
        mlflow.log_metric("glue.average", 50.25)
        results, run = mlflow_lines({"port": 5000})
    assert results == ["Result: glue.average = 50.25"]
    assert run[0] == f"MLflow run {parent.info.run_id} in {mlflow_uri}"
    assert run[1].endswith(
        f":5000/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}"
        "?workflowType=machine_learning"
    )
