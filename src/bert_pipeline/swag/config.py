"""The `finetune_swag` parameters, typed and checked: the run guard parses them before the
first node, so this module imports no ML framework."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bert_pipeline.params import parse_params, require
from bert_pipeline.training.config import FinetuneConfig, check_classifier_pooling


@dataclass
class SwagConfig(FinetuneConfig):
    """The shared hyperparameters with the paper's SWAG recipe: 3 epochs, lr 2e-5, batch 16;
    what scores a choice reads, as GLUE's classifier (`classifier_pooling`)."""

    batch_size: int = 16
    epochs: int = 3
    classifier_pooling: str = "cls"

    def check(self, root: str) -> None:
        super().check(root)
        check_classifier_pooling(self.classifier_pooling, root)


@dataclass
class SwagData:
    # a single labelled file (the JSON-lines sample) is split into train and dev by context:
    # whole contexts go to dev until it holds this share of the examples
    dev_share: float = 0.3
    split_seed: int = 0
    max_train_examples: int | None = None  # the first N, for quick runs; None: all
    max_dev_examples: int | None = None

    def check(self, root: str) -> None:
        require(0 < self.dev_share < 1, root, "dev_share", "must be in (0, 1)", self.dev_share)
        for name in ("max_train_examples", "max_dev_examples"):
            value = getattr(self, name)
            require(value is None or value >= 1, root, name, "must be >= 1 or null", value)


@dataclass
class SwagParams:
    """The `finetune_swag` parameters."""

    registered_model_name: str | None = None
    data: SwagData = field(default_factory=SwagData)
    training: SwagConfig = field(default_factory=SwagConfig)

    def check(self, root: str) -> None:
        self.data.check(f"{root}.data")
        self.training.check(f"{root}.training")


def swag_params(params: Mapping[str, Any] | None) -> SwagParams:
    return parse_params(SwagParams, params, "finetune_swag")
