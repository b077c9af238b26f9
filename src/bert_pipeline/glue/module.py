"""Lightning module and data module for GLUE fine-tuning: the paper's recipe, all weights trained.

[CLS] pooled output -> dropout -> one new linear layer (BertForSequenceClassification); the
trial loop, optimizer, schedule and Trainer are the shared ones of `bert_pipeline.training`.
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, DistributedSampler

from bert_pipeline.glue.features import GlueFeatures
from bert_pipeline.glue.metrics import compute_metrics, task_score
from bert_pipeline.glue.tasks import GlueTask
from bert_pipeline.model import BertForSequenceClassification
from bert_pipeline.training.finetune import FinetuneModule, TrialParams


def seeded_train_loader(dataset, batch_size: int, seed: int, collate) -> DataLoader:
    """Epoch e's order drawn from seed + e: accelerate's seedable sampler, which transformers'
    Trainer uses, so a trial sees the batches of the HF run with the same seed.
    DistributedSampler with one replica does exactly this (Lightning calls set_epoch)."""
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=seed)
    return DataLoader(dataset, batch_size, sampler=sampler, collate_fn=collate)


class GlueDataModule(pl.LightningDataModule):
    """Encoded train, dev (one loader per dev split, MNLI has two) and test features."""

    def __init__(
        self,
        train: GlueFeatures,
        dev: list[GlueFeatures],
        test: GlueFeatures | None,
        batch_size: int,
        eval_batch_size: int,
        seed: int,
    ) -> None:
        super().__init__()
        self.train, self.dev, self.test = train, dev, test
        self.batch_size, self.eval_batch_size, self.seed = batch_size, eval_batch_size, seed

    def train_dataloader(self) -> DataLoader:
        return seeded_train_loader(self.train, self.batch_size, self.seed, self.train.collate)

    def val_dataloader(self) -> list[DataLoader]:
        return [sequential_loader(f, self.eval_batch_size) for f in self.dev]

    def predict_dataloader(self) -> DataLoader:
        return sequential_loader(self.test, self.eval_batch_size)


def sequential_loader(features: GlueFeatures, batch_size: int) -> DataLoader:
    return DataLoader(features, batch_size=batch_size, collate_fn=features.collate)


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
        return task_score(metrics)

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.predictions(self(batch))
