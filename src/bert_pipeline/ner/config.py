"""The `finetune_ner` parameters of both taggers, typed and checked: the run guard parses them
before the first node, so this module imports no ML framework."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bert_pipeline.params import parse_params, require
from bert_pipeline.training.config import FinetuneConfig

# The paper's Table 7 choices; layer 0 is the embeddings' output, L the last layer's.
LAYER_CHOICES = (
    "embeddings",
    "second_to_last",
    "last",
    "weighted_sum_all",
    "sum_last_four",
    "concat_last_four",
)


CONLL_LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def check_labels(labels: list[str], root: str) -> None:
    ok = len(set(labels)) == len(labels) and "O" in labels
    require(ok, root, "labels", "must be distinct and hold 'O'", labels)


@dataclass
class NerConfig(FinetuneConfig):
    """The fine-tuned tagger's hyperparameters (`finetune_ner.finetune`): the shared ones plus
    the label set and sentence packing."""

    labels: list[str] = field(default_factory=lambda: list(CONLL_LABELS))
    pack_sentences: bool = False

    def check(self, root: str) -> None:
        super().check(root)
        check_labels(self.labels, root)

    @property
    def label2id(self) -> dict[str, int]:
        return {label: i for i, label in enumerate(self.labels)}


@dataclass
class NerFeatureConfig(NerConfig):
    """The feature-based tagger's (`finetune_ner.feature_based`): also the layer choices and
    the BiLSTM."""

    layer_choices: list[str] = field(default_factory=lambda: ["concat_last_four"])
    lstm_width: int = 384
    dropout: float = 0.5

    def check(self, root: str) -> None:
        super().check(root)
        require(
            bool(self.layer_choices) and set(self.layer_choices) <= set(LAYER_CHOICES),
            root,
            "layer_choices",
            f"must be a non-empty list of {list(LAYER_CHOICES)}",
            self.layer_choices,
        )
        require(self.lstm_width >= 1, root, "lstm_width", "must be >= 1", self.lstm_width)
        require(
            self.head_lstm_size is None,
            root,
            "head_lstm_size",
            "must be null: the feature-based tagger is a BiLSTM already (lstm_width)",
            self.head_lstm_size,
        )
        require(0 <= self.dropout < 1, root, "dropout", "must be in [0, 1)", self.dropout)


@dataclass
class NerData:
    max_train_sentences: int | None = None  # the first N train sentences; None: all


@dataclass
class NerParams:
    """The `finetune_ner` parameters; `labels` is shared by both taggers, so a section that
    sets its own is refused."""

    labels: list[str] = field(default_factory=lambda: list(CONLL_LABELS))
    registered_model_name: str | None = None
    data: NerData = field(default_factory=NerData)
    finetune: dict[str, Any] = field(default_factory=dict)
    feature_based: dict[str, Any] = field(default_factory=dict)

    def check(self, root: str) -> None:
        check_labels(self.labels, root)
        for section in NER_SECTIONS:
            self.section(section, root)

    def section(self, name: str, root: str = "finetune_ner") -> NerConfig:
        """The typed tagger section `name` with the shared labels."""
        values = getattr(self, name)
        require(
            "labels" not in values,
            root,
            f"{name}.labels",
            f"is not a section parameter: set {root}.labels, shared by both taggers",
            values.get("labels"),
        )
        return NER_SECTIONS[name].from_params({**values, "labels": self.labels}, f"{root}.{name}")


NER_SECTIONS = {"finetune": NerConfig, "feature_based": NerFeatureConfig}


def ner_params(params: Mapping[str, Any] | None) -> NerParams:
    """The typed `finetune_ner` parameters, both taggers' sections checked."""
    return parse_params(NerParams, params, "finetune_ner")


def ner_config(params: Mapping[str, Any] | None, section: str) -> NerConfig:
    """The tagger `section` ("finetune": NerConfig, "feature_based": NerFeatureConfig) of the
    `finetune_ner` parameters, with the shared labels; both sections are checked."""
    return ner_params(params).section(section)
