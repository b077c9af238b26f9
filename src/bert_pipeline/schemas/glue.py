"""Pandera schemas of the GLUE tables that cross node boundaries, one set per task.

The catalog names them per task through its dataset factories, e.g.
`validator: bert_pipeline.schemas.glue.{task}_examples`, so the module exposes for every task
`<task>_examples` (train/dev: labels in the task's label space), `<task>_test_examples`
(unlabeled: label -1) and `<task>_predictions` (dev/test predictions).
"""

from __future__ import annotations

import pandera.pandas as pa

from bert_pipeline.glue.loading import STSB_RANGE
from bert_pipeline.glue.tasks import TASKS, GlueTask

_non_empty = pa.Check(lambda s: s.str.strip().str.len() > 0, error="empty sentence")


def _text_b(task: GlueTask) -> pa.Column:
    if task.is_pair:
        return pa.Column(str, _non_empty)
    return pa.Column(
        object, pa.Check(lambda s: s.isna(), error="single-sentence task"), nullable=True
    )


def _label(task: GlueTask, labeled: bool) -> pa.Column:
    if not labeled:
        return pa.Column(float if task.is_regression else "int64", pa.Check.eq(-1))
    if task.is_regression:
        return pa.Column(float, pa.Check.in_range(*STSB_RANGE))
    return pa.Column("int64", pa.Check.isin(list(range(task.num_labels))))


def examples_schema(task: GlueTask, labeled: bool = True) -> pa.DataFrameSchema:
    """Train/dev tables (`labeled`) or test tables of one task (see glue.loading for columns)."""
    splits = list(task.dev_splits if labeled else task.test_splits)
    if labeled:
        splits.append("train")
    return pa.DataFrameSchema(
        {
            "task": pa.Column(str, pa.Check.eq(task.name)),
            "split": pa.Column(str, pa.Check.isin(splits)),
            "idx": pa.Column("int64"),
            "text_a": pa.Column(str, _non_empty),
            "text_b": _text_b(task),
            "label": _label(task, labeled),
        },
        unique=["split", "idx"],
        strict=True,
        name=f"{task.name}_{'examples' if labeled else 'test_examples'}",
    )


def predictions_schema(task: GlueTask) -> pa.DataFrameSchema:
    """Model outputs: `prediction` is a class id (or STS-B score), `label` is -1 on test."""
    prediction = (
        pa.Column(float)
        if task.is_regression
        else pa.Column("int64", pa.Check.isin(list(range(task.num_labels))))
    )
    splits = [*task.dev_splits, *task.test_splits]
    return pa.DataFrameSchema(
        {
            "task": pa.Column(str, pa.Check.eq(task.name)),
            "split": pa.Column(str, pa.Check.isin(splits)),
            "idx": pa.Column("int64"),
            "label": pa.Column(float if task.is_regression else "int64"),
            "prediction": prediction,
        },
        unique=["split", "idx"],
        strict=True,
        name=f"{task.name}_predictions",
    )


for _task in TASKS.values():
    globals()[f"{_task.name}_examples"] = examples_schema(_task, labeled=True)
    globals()[f"{_task.name}_test_examples"] = examples_schema(_task, labeled=False)
    globals()[f"{_task.name}_predictions"] = predictions_schema(_task)
