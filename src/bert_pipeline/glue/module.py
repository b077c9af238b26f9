"""Lightning module for GLUE fine-tuning: the paper's recipe, all weights trained.

[CLS] pooled output (or, with `classifier_pooling: mean`, the mean of the last layer) -> dropout
-> one new linear layer (BertForSequenceClassification); the trial loop, optimizer, schedule and
Trainer are the shared ones of `bert_pipeline.training`.
"""

from __future__ import annotations

import torch

from bert_pipeline.glue.metrics import compute_metrics, task_score
from bert_pipeline.glue.tasks import HOLDOUT, GlueTask
from bert_pipeline.model import BertForSequenceClassification
from bert_pipeline.training.config import TrialParams
from bert_pipeline.training.finetune import FinetuneModule


class GlueModule(FinetuneModule):
    """Trains one task; a dev split's metrics are the task's official ones."""

    def __init__(
        self,
        model: BertForSequenceClassification,
        task: GlueTask,
        dev_names: list[str],
        trial: TrialParams,
    ):
        super().__init__(model, trial, dev_names)
        self.hparams["task"] = task.name
        self.task = task

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        _, logits = self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        return logits

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        """Class ids, or the STS-B score (the single regression output)."""
        return logits.squeeze(-1) if self.task.is_regression else logits.argmax(-1)

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        loss, _ = self.model(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["labels"]
        )
        return loss

    def outputs(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.predictions(self(batch)).detach().cpu(), batch["labels"].cpu()

    def evaluate(self, split: int, outputs: list) -> tuple[dict[str, float], torch.Tensor]:
        preds = torch.cat([p for p, _ in outputs])
        labels = torch.cat([t for _, t in outputs])
        return compute_metrics(self.task, preds, labels), preds

    def score(self, metrics: dict[str, dict[str, float]]) -> float:
        """The task's score on the train hold-out when there is one, else on the dev splits."""
        if self.scored_on() == HOLDOUT:
            return task_score({HOLDOUT: metrics[HOLDOUT]})
        return task_score(metrics)

    def scored_on(self) -> str:
        return HOLDOUT if HOLDOUT in self.hparams.dev_names else "dev"

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.predictions(self(batch))
