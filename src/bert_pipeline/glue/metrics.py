"""GLUE dev metrics through torchmetrics, and the GLUE score as the leaderboard averages it."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import torch
from torchmetrics import Metric
from torchmetrics.classification import BinaryF1Score, MatthewsCorrCoef, MulticlassAccuracy
from torchmetrics.regression import PearsonCorrCoef, SpearmanCorrCoef

from bert_pipeline.glue.tasks import GlueTask


def _metric(name: str, task: GlueTask) -> Metric:
    if name == "accuracy":
        return MulticlassAccuracy(num_classes=task.num_labels, average="micro")
    if name == "f1":
        return BinaryF1Score()  # positive class 1: paraphrase / duplicate
    if name == "matthews_corr":
        return MatthewsCorrCoef(task="binary")
    if name == "pearson":
        return PearsonCorrCoef()
    if name == "spearman":
        with warnings.catch_warnings():  # it keeps all scores in memory: fine for GLUE dev sets
            warnings.simplefilter("ignore", UserWarning)
            return SpearmanCorrCoef()
    raise ValueError(f"unknown GLUE metric {name!r}")


def compute_metrics(
    task: GlueTask, predictions: Sequence | torch.Tensor, labels: Sequence | torch.Tensor
) -> dict[str, float]:
    """The task's metrics for class-id predictions (or STS-B scores) against gold labels."""
    dtype = torch.float64 if task.is_regression else torch.long
    preds = torch.as_tensor(predictions, dtype=dtype).reshape(-1)
    target = torch.as_tensor(labels, dtype=dtype).reshape(-1)
    if preds.numel() != target.numel():
        raise ValueError(f"{preds.numel()} predictions for {target.numel()} labels")
    return {name: float(_metric(name, task)(preds, target)) for name in task.metrics}


def task_score(metrics: Mapping[str, Mapping[str, float]]) -> float:
    """One number per task: its metrics averaged, then its dev splits (MNLI m/mm) averaged."""
    per_split = [sum(m.values()) / len(m) for m in metrics.values()]
    return sum(per_split) / len(per_split)
