"""Fine-tunes BERT for SQuAD on the shared core: the paper's start/end vectors over the
paragraph's tokens (BertForQuestionAnswering), best (lr, seed, epoch) on dev F1."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from bert_pipeline.model import BertForQuestionAnswering
from bert_pipeline.model.checkpoint import (
    check_checkpoint,
    model_to_checkpoint,
    tokenizer_from_checkpoint,
    with_new_head,
)
from bert_pipeline.squad.config import SquadConfig
from bert_pipeline.squad.data import squad_version
from bert_pipeline.squad.evaluation import best_answers, squad_metrics
from bert_pipeline.squad.features import SquadFeatures, build_windows
from bert_pipeline.training.config import TrialParams
from bert_pipeline.training.finetune import (
    FinetuneDataModule,
    FinetuneModule,
    best_summary,
    run_grid,
)


class SquadModule(FinetuneModule):
    """One trial; a dev pass is scored by the official F1 of its post-processed answers."""

    def __init__(
        self,
        model: BertForQuestionAnswering,
        trial: TrialParams,
        dev: pd.DataFrame,
        dev_windows: list,
        config: SquadConfig,
        version_2: bool,
    ):
        super().__init__(model, trial, ["dev"])
        self.dev, self.dev_windows, self.config = dev, dev_windows, config
        self.version_2 = version_2

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        loss, _, _ = self.model(
            batch["input_ids"],
            batch["token_type_ids"],
            batch["attention_mask"],
            batch["start_positions"],
            batch["end_positions"],
        )
        return loss

    def outputs(self, batch: dict[str, torch.Tensor]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each window's start and end logits, without padding."""
        _, start, end = self.model(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
        start, end = start.detach().cpu().numpy(), end.detach().cpu().numpy()
        return [
            (s[:n], e[:n]) for s, e, n in zip(start, end, batch["lengths"].tolist(), strict=True)
        ]

    def evaluate(self, split: int, outputs: list) -> tuple[dict[str, float], dict]:
        logits = [w for batch in outputs for w in batch]
        answers, null_diff = best_answers(
            self.dev,
            self.dev_windows,
            [s for s, _ in logits],
            [e for _, e in logits],
            self.config.n_best_size,
            self.config.max_answer_length,
        )
        metrics, final = squad_metrics(
            self.dev,
            answers,
            null_diff if self.version_2 else None,
            self.config.null_score_diff_threshold,
        )
        return metrics, {"predictions": final, "null_odds": null_diff}

    def score(self, metrics: dict[str, dict[str, float]]) -> float:
        return metrics["dev"]["f1"]


@dataclass
class SquadResult:
    checkpoint: dict
    record: dict[str, Any]
    predictions: dict[str, str]  # question id -> answer ("" for no answer)
    null_odds: dict[str, float]  # question id -> null score - best span score


def finetune_squad(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    checkpoint: Mapping,
    config: SquadConfig,
    *,
    source: str = "checkpoint",
    mlflow_run_id: str | None = None,
) -> SquadResult:
    """Trains over the (lr x seed) grid; dev answers and metrics of the best epoch."""
    tokenizer = tokenizer_from_checkpoint(checkpoint, source, config.lowercase)
    check_checkpoint(checkpoint, tokenizer, source, config.max_seq_length)
    shape = (config.max_seq_length, config.doc_stride, config.max_query_length)
    train_windows = build_windows(tokenizer, train, *shape)
    dev_windows = build_windows(tokenizer, dev, *shape)
    train_set, dev_set = SquadFeatures(train_windows), SquadFeatures(dev_windows)
    version = squad_version(train, dev)

    def build(trial: TrialParams) -> tuple[SquadModule, FinetuneDataModule]:
        model = with_new_head(
            checkpoint,
            BertForQuestionAnswering,
            None,
            source,
            trial.seed,
            head="qa_outputs",
            head_lstm_size=config.head_lstm_size,
        )
        data = FinetuneDataModule(
            train_set, [dev_set], None, config.batch_size, config.eval_batch_size, trial.seed
        )
        return SquadModule(model, trial, dev, dev_windows, config, version == "2.0"), data

    grid = run_grid("squad", config, build, mlflow_run_id=mlflow_run_id)
    kept = grid.module.best_predictions[0]
    record = {
        "version": version,
        "dev_metrics": grid.dev_metrics["dev"],
        "best": best_summary(grid),
        "trials": grid.trials,
        "train_questions": len(train),
        "dev_questions": len(dev),
        "windows": {"train": len(train_windows), "dev": len(dev_windows)},
    }
    out = model_to_checkpoint(grid.module.model, tokenizer, finetuning_task="squad")
    return SquadResult(out, record, kept["predictions"], kept["null_odds"])
