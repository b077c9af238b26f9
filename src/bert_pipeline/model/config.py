"""BERT hyper-parameters, named and serialised exactly like Hugging Face's ``config.json``.

Keeping HF's field names means a checkpoint folder written by us is read by ``transformers``
unchanged, and any HF BERT ``config.json`` can be read back here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

CONFIG_FILE = "config.json"  # the name transformers reads a checkpoint's config from

# (num_hidden_layers, hidden_size, num_attention_heads); intermediate_size is 4 x hidden_size.
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
# What a sequence classifier reads: the pooled [CLS] (the paper, transformers), the mean of the
# last layer over the unpadded tokens (ours: an encoder pretrained without NSP never trains [CLS])
# or the last unpadded token (a left-to-right encoder's only position that has seen the input).
CLASSIFIER_POOLINGS = ("cls", "mean", "last")


def dropout_fields(rate: float | None) -> dict[str, float]:
    """The config fields one dropout rate sets (hidden, which the heads follow, and attention);
    none for None, which keeps the config's."""
    if rate is None:
        return {}
    return {"hidden_dropout_prob": rate, "attention_probs_dropout_prob": rate}


@dataclass
class BertConfig:
    """Architecture of a BERT encoder (defaults: BERT-base, uncased vocabulary)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    classifier_dropout: float | None = None
    classifier_pooling: str = "cls"  # not a transformers field: it reads only "cls"
    # transformers' field: a left-to-right encoder, each position attends to itself and those
    # before it (the paper's "LTR" ablation, pretrained with pretrain_model.objective: ltr)
    is_decoder: bool = False
    # not a transformers field: a randomly initialised BiLSTM of this width per direction between
    # the encoder and a fine-tuning head (the paper's "+ BiLSTM" row); None: no BiLSTM
    head_lstm_size: int | None = None

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not a multiple of "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(
                f"hidden_act={self.hidden_act!r} is not supported; "
                f"use one of {SUPPORTED_ACTIVATIONS}"
            )
        if self.head_lstm_size is not None and self.head_lstm_size < 1:
            raise ValueError(f"head_lstm_size={self.head_lstm_size} must be >= 1 or None")
        if self.classifier_pooling not in CLASSIFIER_POOLINGS:
            raise ValueError(
                f"classifier_pooling={self.classifier_pooling!r} is not supported; "
                f"use one of {CLASSIFIER_POOLINGS}"
            )

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> BertConfig:
        """Config of a named size (BERT / Turc et al. family); any field can be overridden."""
        if name not in PRESETS:
            raise ValueError(f"unknown BERT preset {name!r}; choose one of {sorted(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        fields = dict(
            num_hidden_layers=layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            intermediate_size=4 * hidden,
        )
        fields.update(overrides)
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        """The HF ``config.json`` form (``model_type`` included, no ``architectures``); the
        fields transformers lacks or defaults (`classifier_pooling`, `is_decoder`,
        `head_lstm_size`) only when they differ from a bidirectional [CLS] model's."""
        fields = dataclasses.asdict(self)
        for name, plain in (("classifier_pooling", "cls"), ("is_decoder", False)):
            if fields[name] == plain:
                del fields[name]
        if fields["head_lstm_size"] is None:
            del fields["head_lstm_size"]
        return {"model_type": "bert", **fields}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BertConfig:
        """Read an HF BERT ``config.json`` dict; fields this model does not use are ignored."""
        if data.get("model_type", "bert") != "bert":
            raise ValueError(f"config model_type={data['model_type']!r} is not 'bert'")
        position_type = data.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ValueError(
                f"position_embedding_type={position_type!r} is not supported (only 'absolute')"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
