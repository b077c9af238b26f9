"""Fine-tunes BERT for SWAG on the shared core: a vector scores each choice's pooled [CLS], a
softmax over the four (BertForMultipleChoice); the best (lr, seed, epoch) by dev accuracy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from bert_pipeline.model import BertForMultipleChoice
from bert_pipeline.model.checkpoint import (
    check_checkpoint,
    model_to_checkpoint,
    tokenizer_from_checkpoint,
    with_new_head,
)
from bert_pipeline.swag.config import SwagConfig
from bert_pipeline.swag.data import ENDINGS
from bert_pipeline.swag.features import SwagFeatures, encode_choices
from bert_pipeline.training.config import TrialParams
from bert_pipeline.training.finetune import (
    FinetuneDataModule,
    FinetuneModule,
    best_summary,
    run_grid,
)


class SwagModule(FinetuneModule):
    """One trial; a dev pass is scored by accuracy (the paper's SWAG metric)."""

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        _, logits = self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        return logits

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        loss, _ = self.model(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["labels"]
        )
        return loss

    def outputs(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self(batch).detach().float().softmax(-1).cpu(), batch["labels"].cpu()

    def evaluate(self, split: int, outputs: list) -> tuple[dict[str, float], torch.Tensor]:
        probabilities = torch.cat([p for p, _ in outputs])
        labels = torch.cat([t for _, t in outputs])
        accuracy = (probabilities.argmax(-1) == labels).float().mean().item()
        return {"accuracy": accuracy}, probabilities

    def score(self, metrics: dict[str, dict[str, float]]) -> float:
        return metrics["dev"]["accuracy"]

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self(batch).float().softmax(-1)


@dataclass
class SwagResult:
    checkpoint: dict
    record: dict[str, Any]
    dev_probabilities: pd.DataFrame  # a probability per ending, one row per dev example
    test_probabilities: pd.DataFrame  # the same for test (the leaderboard's submission)


def _features(tokenizer, frame: pd.DataFrame, max_seq_length: int) -> SwagFeatures:
    return SwagFeatures(encode_choices(tokenizer, frame, max_seq_length), frame["label"].tolist())


def _probabilities(values: torch.Tensor, frame: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame(values.reshape(-1, len(ENDINGS)).numpy(), columns=ENDINGS)
    return table.assign(id=frame["id"].to_numpy())[["id", *ENDINGS]]


def finetune_swag(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    checkpoint: Mapping,
    config: SwagConfig,
    *,
    source: str = "checkpoint",
    mlflow_run_id: str | None = None,
) -> SwagResult:
    """Trains over the (lr x seed) grid; dev accuracy and test probabilities of the best epoch."""
    tokenizer = tokenizer_from_checkpoint(checkpoint, source, config.lowercase)
    check_checkpoint(checkpoint, tokenizer, source, config.max_seq_length)
    length = config.max_seq_length
    train_set, dev_set = _features(tokenizer, train, length), _features(tokenizer, dev, length)
    test_set = _features(tokenizer, test, length)

    def build(trial: TrialParams) -> tuple[SwagModule, FinetuneDataModule]:
        model = with_new_head(
            checkpoint,
            BertForMultipleChoice,
            None,
            source,
            trial.seed,
            classifier_pooling=config.classifier_pooling,
            head_lstm_size=config.head_lstm_size,
        )
        data = FinetuneDataModule(
            train_set, [dev_set], test_set, config.batch_size, config.eval_batch_size, trial.seed
        )
        return SwagModule(model, trial, ["dev"]), data

    grid = run_grid("swag", config, build, mlflow_run_id=mlflow_run_id)
    test_values = torch.empty(0, len(ENDINGS))
    if len(test_set):
        test_values = grid.predict_test()
    record = {
        "dev_metrics": grid.dev_metrics["dev"],
        "best": best_summary(grid),
        "trials": grid.trials,
        "examples": {"train": len(train), "dev": len(dev), "test": len(test)},
    }
    out = model_to_checkpoint(grid.module.model, tokenizer, finetuning_task="swag")
    return SwagResult(
        out,
        record,
        _probabilities(grid.module.best_predictions[0], dev),
        _probabilities(test_values, test),
    )
