"""Lightning module and data module for GLUE fine-tuning: the paper's recipe, all weights trained.

[CLS] pooled output -> dropout -> one new linear layer (BertForSequenceClassification); the
optimizer, schedule and Trainer are the shared ones of `bert_pipeline.training.core`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, DistributedSampler

from bert_pipeline.glue.features import GlueFeatures
from bert_pipeline.glue.metrics import compute_metrics, task_score
from bert_pipeline.glue.tasks import GlueTask
from bert_pipeline.model import BertForSequenceClassification
from bert_pipeline.training.config import OptimizerParams
from bert_pipeline.training.core import configure_adamw


@dataclass
class TrialParams:
    """One trial of the lr x seed grid; the total step count comes from the Trainer."""

    learning_rate: float
    seed: int
    weight_decay: float = 0.01
    warmup_proportion: float = 0.1

    @property
    def name(self) -> str:
        """Prefix of the trial's metrics in the task's MLflow run."""
        return f"lr_{self.learning_rate:g}_seed_{self.seed}"


class GlueDataModule(pl.LightningDataModule):
    """Encoded train, dev (one loader per dev split, MNLI has two) and test features.

    Training batches are shuffled with epoch e's order drawn from seed + e: accelerate's seedable
    sampler, which transformers' Trainer uses, so a trial sees the batches of the HF run with the
    same seed. DistributedSampler with one replica does exactly this (Lightning calls set_epoch).
    """

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
        sampler = DistributedSampler(
            self.train, num_replicas=1, rank=0, shuffle=True, seed=self.seed
        )
        return DataLoader(
            self.train, self.batch_size, sampler=sampler, collate_fn=self.train.collate
        )

    def val_dataloader(self) -> list[DataLoader]:
        return [sequential_loader(f, self.eval_batch_size) for f in self.dev]

    def predict_dataloader(self) -> DataLoader:
        return sequential_loader(self.test, self.eval_batch_size)


def sequential_loader(features: GlueFeatures, batch_size: int) -> DataLoader:
    return DataLoader(features, batch_size=batch_size, collate_fn=features.collate)


class GlueModule(pl.LightningModule):
    """Trains one task; after every dev pass records the dev metrics and keeps the best weights.

    `dev_names` are the split names of the validation dataloaders, in order.
    """

    def __init__(
        self,
        model: BertForSequenceClassification,
        task: GlueTask,
        dev_names: list[str],
        trial: TrialParams,
    ):
        super().__init__()
        self.save_hyperparameters(
            {"task": task.name, "dev_names": list(dev_names), **dataclasses.asdict(trial)}
        )
        self.model = model
        self.task = task
        self.trial = trial
        self.history: list[dict] = []
        self.best_score = float("-inf")
        self.best_epoch = -1
        self.best_state: dict[str, torch.Tensor] | None = None
        self.best_predictions: list[torch.Tensor] = []  # per dev split, of the best epoch
        self._outputs: dict[int, tuple[list, list]] = {}

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        _, logits = self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        return logits

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        """Class ids, or the STS-B score (the single regression output)."""
        return logits.squeeze(-1) if self.task.is_regression else logits.argmax(-1)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, _ = self.model(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["labels"]
        )
        self.log("train_loss", loss, prog_bar=True, batch_size=len(batch["labels"]))
        return loss

    def on_validation_epoch_start(self) -> None:
        self._outputs = {}

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        preds, labels = self._outputs.setdefault(dataloader_idx, ([], []))
        preds.append(self.predictions(self(batch)).detach().cpu())
        labels.append(batch["labels"].cpu())

    def on_validation_epoch_end(self) -> None:
        outputs = {i: (torch.cat(p), torch.cat(t)) for i, (p, t) in sorted(self._outputs.items())}
        metrics = {
            self.hparams.dev_names[i]: compute_metrics(self.task, preds, labels)
            for i, (preds, labels) in outputs.items()
        }
        score = task_score(metrics)
        self.history.append({"epoch": self.current_epoch, "score": score, "metrics": metrics})
        for split, values in metrics.items():
            for name, value in values.items():
                self.log(f"{split}_{name}", value, prog_bar=True)
        # NaN (e.g. Pearson of constant predictions) ranks lowest; the first epoch always counts
        comparable = score if math.isfinite(score) else -math.inf
        if self.best_state is None or comparable > self.best_score:
            self.best_score, self.best_epoch = comparable, self.current_epoch
            self.best_state = copy.deepcopy(
                {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
            )
            self.best_predictions = [preds for preds, _ in outputs.values()]

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.predictions(self(batch))

    def configure_optimizers(self):
        total = int(self.trainer.estimated_stepping_batches)
        optimizer = OptimizerParams(
            lr=self.trial.learning_rate, weight_decay=self.trial.weight_decay
        )
        warmup = int(self.trial.warmup_proportion * total)
        return configure_adamw(self, self.model, optimizer, warmup, total)
