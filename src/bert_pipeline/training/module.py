"""LightningModule for BERT pretraining (MLM + NSP, or a left-to-right LM) with the original
BERT optimisation recipe."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torchmetrics import MeanMetric

from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.model.bert import IGNORE_INDEX
from bert_pipeline.training.config import OptimizerParams, lm_metric
from bert_pipeline.training.core import configure_adamw

BATCH_KEYS = (
    "input_ids",
    "token_type_ids",
    "attention_mask",
    "masked_lm_positions",
    "masked_lm_labels",
    "next_sentence_label",
)


class BertPretrainingModule(pl.LightningModule):
    """Wraps `BertForPreTraining`; logs train losses per step and validation LM/NSP metrics.

    `mlm_tokens_per_step` (given): the masked-LM loss is summed over the step's masked tokens and
    divided by it, not averaged over them (`mlm_loss_average`).

    The LM head reads the positions the batch names (`masked_lm_positions`): the masked ones
    (objective "mlm"), or every position for the token after it (objective "ltr", whose
    model config is causal); its metrics are named by the objective (`lm_metric`).
    """

    def __init__(
        self,
        model_config: dict[str, Any],
        optimizer: dict[str, Any] | None = None,
        warmup_steps: int = 0,
        max_steps: int = 1000,
        next_sentence: bool = True,
        nsp_loss_weight: float = 1.0,
        objective: str = "mlm",
        mlm_tokens_per_step: float | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()  # plain values only: checkpoints load with weights_only
        self.optimizer_params = OptimizerParams(**(optimizer or {}))
        self.config = BertConfig.from_dict(dict(model_config))
        self.model = BertForPreTraining(self.config)
        self.val_mlm_loss = MeanMetric()
        self.val_mlm_accuracy = MeanMetric()
        self.val_nsp_accuracy = MeanMetric()

    def forward(self, batch: dict[str, torch.Tensor], return_logits: bool = True):
        return self.model(**{k: batch[k] for k in BATCH_KEYS}, return_logits=return_logits)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        out = self(batch, return_logits=False)  # the losses only: no [N, vocab] logits
        bs = batch["input_ids"].shape[0]
        # "No NSP" (next_sentence=false): every B continues its A, only the MLM loss trains
        loss = out.mlm_loss
        if self.hparams.mlm_tokens_per_step:  # mlm_loss_average "dataset": a sum over a constant
            masked = (batch["masked_lm_labels"] != IGNORE_INDEX).sum()
            loss = loss * masked / self.hparams.mlm_tokens_per_step
        if self.hparams.next_sentence:
            loss = loss + self.hparams.nsp_loss_weight * out.nsp_loss
        self.log("train/loss", loss, prog_bar=True, batch_size=bs)
        self.log(f"train/{self.hparams.objective}_loss", out.mlm_loss, batch_size=bs)
        if self.hparams.next_sentence:
            self.log("train/nsp_loss", out.nsp_loss, batch_size=bs)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        # Eager even in a compiled run. Its graphs (split at the data-dependent masked rows,
        # again for a short last batch) take 67 s to compile on a first run, 9 s on a later
        # one, and eager adds 2 s a pass: even over a budget hour's ~21 passes, with fewer
        # graphs and no stall at the first validation (benchmarks/validation_speed.md).
        with torch.compiler.set_stance("force_eager"):
            out = self(batch)
        labels = batch["masked_lm_labels"]
        targets = labels[labels != IGNORE_INDEX]
        if targets.numel():
            logits = out.prediction_logits.float()
            token_loss = nn.functional.cross_entropy(logits, targets, reduction="none")
            self.val_mlm_loss.update(token_loss)
            self.val_mlm_accuracy.update((logits.argmax(-1) == targets).float())
        nsp_correct = out.seq_relationship_logits.argmax(-1) == batch["next_sentence_label"]
        self.val_nsp_accuracy.update(nsp_correct.float())

    def on_validation_epoch_end(self) -> None:
        mlm_loss = self.val_mlm_loss.compute()
        objective = self.hparams.objective
        metrics = {
            lm_metric(objective, "loss"): mlm_loss,
            "val/perplexity": torch.exp(mlm_loss.clamp(max=50.0)),
            lm_metric(objective, "accuracy"): self.val_mlm_accuracy.compute(),
        }
        if self.hparams.next_sentence:
            metrics["val/nsp_accuracy"] = self.val_nsp_accuracy.compute()
        self.log_dict(metrics, prog_bar=False)
        self.log(f"val_{objective}_loss", mlm_loss, prog_bar=True, logger=False)
        for metric in (self.val_mlm_loss, self.val_mlm_accuracy, self.val_nsp_accuracy):
            metric.reset()

    def configure_optimizers(self) -> dict[str, Any]:
        return configure_adamw(
            self,
            self.model,
            self.optimizer_params,
            self.hparams.warmup_steps,
            self.hparams.max_steps,
        )

    # Exact resume: Lightning restores weights, optimizer, scheduler and (through the stateful
    # loader) the data position; the RNG streams behind dropout are saved here as well.
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng_states"] = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            checkpoint["rng_states"]["cuda"] = torch.cuda.get_rng_state_all()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        states = checkpoint.get("rng_states")
        if not states:
            return
        torch.set_rng_state(states["torch"])
        if "cuda" in states and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(states["cuda"])
