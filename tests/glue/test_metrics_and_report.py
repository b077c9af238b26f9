"""Metrics against hand-computed values, the summary table and the submission files."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bert_pipeline.glue.metrics import compute_metrics, task_score
from bert_pipeline.glue.report import (
    glue_average,
    submission_files,
    summary_markdown,
    summary_table,
)
from bert_pipeline.glue.tasks import get_task


def test_matthews_of_a_fixed_confusion_matrix():
    # TP=6, TN=3, FP=1, FN=2: MCC = (6*3 - 1*2) / sqrt(7*8*4*5)
    labels = [1] * 6 + [0] * 3 + [0] * 1 + [1] * 2
    preds = [1] * 6 + [0] * 3 + [1] * 1 + [0] * 2
    got = compute_metrics(get_task("cola"), preds, labels)
    assert got["matthews_corr"] == pytest.approx(16 / math.sqrt(7 * 8 * 4 * 5), abs=1e-6)


def test_accuracy_and_f1():
    labels = [1, 1, 1, 0, 0, 1, 0, 0]
    preds = [1, 0, 1, 0, 1, 1, 0, 0]  # TP=3, FN=1, FP=1, TN=3
    got = compute_metrics(get_task("mrpc"), preds, labels)
    assert got == pytest.approx({"f1": 0.75, "accuracy": 0.75})
    mnli = compute_metrics(get_task("mnli"), [0, 1, 2, 2], [0, 1, 1, 2])
    assert mnli == pytest.approx({"accuracy": 0.75})


def test_pearson_and_spearman():
    got = compute_metrics(get_task("stsb"), [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0])
    assert got["pearson"] == pytest.approx(0.8, abs=1e-6)
    assert got["spearman"] == pytest.approx(0.8, abs=1e-6)
    perfect = compute_metrics(get_task("stsb"), [0.1, 0.5, 4.0], [1.0, 2.0, 5.0])
    assert perfect["spearman"] == pytest.approx(1.0, abs=1e-5)


def test_glue_average_averages_multi_metric_tasks_first_and_skips_wnli():
    assert task_score({"dev": {"f1": 0.9, "accuracy": 0.8}}) == pytest.approx(0.85)
    assert task_score(
        {"dev_matched": {"accuracy": 0.8}, "dev_mismatched": {"accuracy": 0.7}}
    ) == pytest.approx(0.75)
    average, used = glue_average({"mrpc": 85.0, "cola": 50.0, "wnli": 10.0})
    assert average == pytest.approx(67.5) and used == ["cola", "mrpc"]


def _record(task, dev_metrics):
    return {
        "task": task,
        "dev_metrics": dev_metrics,
        "score": task_score(dev_metrics),
        "best": {"learning_rate": 2e-5, "seed": 1, "best_epoch": 2, "best_score": 0},
        "train_examples": 10,
    }


def test_summary_table():
    table = summary_table(
        [
            _record("wnli", {"dev": {"accuracy": 0.5}}),
            _record("mrpc", {"dev": {"f1": 0.9, "accuracy": 0.8}}),
            _record(
                "mnli", {"dev_matched": {"accuracy": 0.8}, "dev_mismatched": {"accuracy": 0.7}}
            ),
        ]
    )
    assert table["task"].tolist() == ["mrpc", "mnli", "wnli", "GLUE average"]
    mnli = table.set_index("task").loc["mnli"]
    assert mnli["metrics"] == "accuracy-m/accuracy-mm" and mnli["dev"] == "80.0/70.0"
    average = table.set_index("task").loc["GLUE average"]
    assert average["score"] == pytest.approx(80.0)  # (85 + 75) / 2, WNLI left out
    assert not table.set_index("task").loc["wnli", "in_glue_average"]
    assert "| mrpc | f1/accuracy | 90.0/80.0 | 85.0 |" in summary_markdown(table)


def test_submission_files_use_glue_label_strings():
    rte = pd.DataFrame(
        {"task": "rte", "split": "test", "idx": [1, 0], "label": -1, "prediction": [0, 1]}
    )
    mnli = pd.DataFrame(
        {
            "task": "mnli",
            "split": ["test_matched", "test_mismatched"],
            "idx": [0, 0],
            "label": -1,
            "prediction": [2, 1],
        }
    )
    stsb = pd.DataFrame(
        {"task": "stsb", "split": "test", "idx": [0], "label": -1.0, "prediction": [3.14159]}
    )
    files = submission_files([rte, mnli, stsb])
    assert files["RTE.tsv"] == "index\tprediction\n0\tnot_entailment\n1\tentailment\n"
    assert files["MNLI-m.tsv"] == "index\tprediction\n0\tcontradiction\n"
    assert files["MNLI-mm.tsv"] == "index\tprediction\n0\tneutral\n"
    assert files["STS-B.tsv"] == "index\tprediction\n0\t3.142\n"
