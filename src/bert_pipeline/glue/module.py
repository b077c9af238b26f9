"""Lightning module for GLUE fine-tuning: the paper's recipe, all weights trained.

[CLS] pooled output -> dropout -> one new linear layer (BertForSequenceClassification), AdamW
with weight decay except on biases and LayerNorm weights, linear warmup then linear decay to 0.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import lightning.pytorch as pl
import torch
from torch.optim.lr_scheduler import LambdaLR

from bert_pipeline.glue.metrics import compute_metrics, task_score
from bert_pipeline.glue.tasks import GlueTask
from bert_pipeline.model import BertForSequenceClassification


def linear_warmup_decay(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """LR multiplier: 0 -> 1 over `warmup_steps`, then 1 -> 0 at `total_steps` (as BERT/HF)."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


class GlueModule(pl.LightningModule):
    """Trains one task; after every dev pass records the dev metrics and keeps the best weights.

    `dev_names` are the split names of the validation dataloaders, in order (MNLI has two);
    `on_dev_metrics(epoch, {split: {metric: value}})` is called after every dev pass.
    """

    def __init__(
        self,
        model: BertForSequenceClassification,
        task: GlueTask,
        dev_names: list[str],
        learning_rate: float,
        weight_decay: float,
        warmup_proportion: float,
        total_steps: int,
        on_dev_metrics: Callable[[int, dict[str, dict[str, float]]], None] | None = None,
    ):
        super().__init__()
        self.model = model
        self.task = task
        self.dev_names = dev_names
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.warmup_steps = int(warmup_proportion * total_steps)
        self.total_steps = total_steps
        self.on_dev_metrics = on_dev_metrics
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
            self.dev_names[i]: compute_metrics(self.task, preds, labels)
            for i, (preds, labels) in outputs.items()
        }
        score = task_score(metrics)
        self.history.append({"epoch": self.current_epoch, "score": score, "metrics": metrics})
        if self.on_dev_metrics is not None:
            self.on_dev_metrics(self.current_epoch, metrics)
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

    def configure_optimizers(self):
        no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
        params = list(self.model.named_parameters())
        groups = [
            {
                "params": [p for n, p in params if not n.endswith(no_decay)],
                "weight_decay": self.weight_decay,
            },
            {"params": [p for n, p in params if n.endswith(no_decay)], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(groups, lr=self.learning_rate, betas=(0.9, 0.999), eps=1e-6)
        schedule = LambdaLR(optimizer, linear_warmup_decay(self.warmup_steps, self.total_steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
