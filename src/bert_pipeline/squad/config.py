"""The `finetune_squad` parameters, typed and checked: the run guard parses them before the
first node, so this module imports no ML framework."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bert_pipeline.params import parse_params, require
from bert_pipeline.training.config import FinetuneConfig


@dataclass
class SquadConfig(FinetuneConfig):
    """The shared hyperparameters plus windowing and answer search (run_qa.py's defaults)."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    batch_size: int = 32
    epochs: int = 2
    null_score_diff_threshold: float | None = None  # v2.0; None: the best on dev

    def check(self, root: str) -> None:
        super().check(root)
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            require(getattr(self, name) >= 1, root, name, "must be >= 1", getattr(self, name))
        least = self.max_query_length + self.doc_stride + 3
        require(
            self.max_seq_length > least,
            root,
            "max_seq_length",
            f"must exceed max_query_length + doc_stride + 3 = {least}",
            self.max_seq_length,
        )


@dataclass
class SquadData:
    max_train_questions: int | None = None  # the first N questions, for quick runs; None: all
    max_dev_questions: int | None = None


@dataclass
class SquadParams:
    """The `finetune_squad` parameters."""

    registered_model_name: str | None = None
    data: SquadData = field(default_factory=SquadData)
    training: SquadConfig = field(default_factory=SquadConfig)

    def check(self, root: str) -> None:
        self.training.check(f"{root}.training")


def squad_params(params: Mapping[str, Any] | None) -> SquadParams:
    return parse_params(SquadParams, params, "finetune_squad")
