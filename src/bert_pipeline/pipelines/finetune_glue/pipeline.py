"""GLUE fine-tuning: one Kedro namespace per task from one template, then a summary and a zip.

The set of namespaces is structure: the pipeline registry passes `finetune_glue.tasks` and
`finetune_glue.init_from_mnli` of the run's configuration (`bert_pipeline.pipeline_registry`);
`--params` at run time cannot add tasks, use `--namespaces=<task>` to run a subset.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from bert_pipeline.glue.tasks import UnknownTaskError, get_task
from bert_pipeline.pipelines.finetune_glue.nodes import (
    build_submission,
    build_task_tables,
    finetune_glue_task,
    summarize_glue,
)

PARAMS = "params:finetune_glue"


def task_template() -> Pipeline:
    """The nodes of one task; namespacing prefixes every dataset with `<task>.`."""
    return Pipeline(
        [
            Node(
                build_task_tables,
                inputs=["glue_raw", PARAMS],
                outputs=["glue_train", "glue_dev", "glue_test"],
                name="build_task_tables",
                tags=["glue_data"],
            ),
            Node(
                finetune_glue_task,
                inputs=["glue_train", "glue_dev", "glue_test", "glue_pretrained_model", PARAMS],
                outputs=[
                    "glue_model",
                    "glue_dev_metrics",
                    "glue_dev_predictions",
                    "glue_test_predictions",
                ],
                name="finetune_task",
                tags=["glue_training"],
            ),
        ]
    )


def _names(tasks: list[str], parameter: str) -> list[str]:
    try:
        return [get_task(t).name for t in tasks]
    except UnknownTaskError as exc:
        raise UnknownTaskError(f"parameter {parameter}: {exc}") from None


def create_pipeline(tasks: list[str], init_from_mnli: list[str] | None = None) -> Pipeline:
    """Namespaces `<task>` for each task, plus `glue_summary` and `glue_submission` nodes."""
    tasks = _names(tasks, "finetune_glue.tasks")
    init_from_mnli = _names(init_from_mnli or [], "finetune_glue.init_from_mnli")
    if init_from_mnli and "mnli" not in tasks:
        raise ValueError(
            f"parameter finetune_glue.init_from_mnli={init_from_mnli} needs mnli in "
            f"finetune_glue.tasks={tasks}"
        )
    if "mnli" in init_from_mnli:
        raise ValueError("parameter finetune_glue.init_from_mnli cannot list mnli itself")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"parameter finetune_glue.tasks lists a task twice: {tasks}")
    if not tasks:
        return Pipeline([])
    template = task_template()
    per_task = [
        Pipeline(
            template,
            namespace=task,
            inputs={
                "glue_pretrained_model": "mnli.glue_model"
                if task in init_from_mnli
                else "glue_pretrained_model"
            },
            parameters={PARAMS: PARAMS},
            tags=[f"glue_{task}"],
        )
        for task in tasks
    ]
    reporting = Pipeline(
        [
            Node(
                summarize_glue,
                inputs=[f"{t}.glue_dev_metrics" for t in tasks],
                outputs=["glue_summary_table", "glue_summary_markdown", "glue_summary_metrics"],
                name="summarize_glue",
                tags=["glue_reporting"],
            ),
            Node(
                build_submission,
                inputs=[f"{t}.glue_test_predictions" for t in tasks],
                outputs="glue_submission",
                name="build_glue_submission",
                tags=["glue_reporting"],
            ),
        ]
    )
    return sum(per_task, Pipeline([])) + reporting
