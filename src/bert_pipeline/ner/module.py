"""The two NER taggers of the paper, trained by the shared fine-tuning core.

Fine-tuning: BertForTokenClassification, all weights trained, read at first sub-tokens.
Feature-based: BERT frozen; per word, the hidden states of chosen layers (computed once, see
`WordFeatureExtractor`) go through a two-layer BiLSTM and a linear classifier.
"""

from __future__ import annotations

from collections.abc import Sequence

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.data import Dataset

from bert_pipeline.model import BertModel, hidden_states
from bert_pipeline.model.bert import IGNORE_INDEX
from bert_pipeline.ner.config import LAYER_CHOICES
from bert_pipeline.ner.features import split_words
from bert_pipeline.ner.metrics import entity_metrics
from bert_pipeline.training.config import TrialParams
from bert_pipeline.training.finetune import FinetuneModule


def choice_layers(choice: str, num_layers: int) -> list[int]:
    """The hidden-state indices (0 = embeddings, ..., num_layers = last) a choice reads; the
    "last four" choices of a model with under 4 layers read all its hidden states."""
    if choice not in LAYER_CHOICES:
        raise ValueError(f"layer choice {choice!r} is not one of {LAYER_CHOICES}")
    if choice == "embeddings":
        return [0]
    if choice == "last":
        return [num_layers]
    if choice == "second_to_last":
        return [num_layers - 1]
    if choice == "weighted_sum_all":
        return list(range(num_layers + 1))
    return list(range(max(0, num_layers - 3), num_layers + 1))  # fewer if the model is smaller


class NerModule(FinetuneModule):
    """One trial of a tagger: loss on labelled positions, dev scored by entity F1."""

    def __init__(
        self,
        model: nn.Module,
        trial: TrialParams,
        dev_names: list[str],
        dev_gold: list[list[list[str]]],
        labels: Sequence[str],
    ):
        super().__init__(model, trial, dev_names)
        self.dev_gold = dev_gold
        self.labels = list(labels)

    def logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        _, logits = self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        return logits

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = self.logits(batch)
        return F.cross_entropy(
            logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX
        )

    def outputs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Predicted label ids of the batch's words, in order."""
        return self.logits(batch).argmax(-1)[batch["first"]].cpu()

    def tags(self, ids: torch.Tensor, lengths: Sequence[int]) -> list[list[str]]:
        return split_words([self.labels[i] for i in ids.tolist()], lengths)

    def evaluate(self, split: int, outputs: list) -> tuple[dict[str, float], list[list[str]]]:
        gold = self.dev_gold[split]
        pred = self.tags(torch.cat(outputs), [len(s) for s in gold])
        return entity_metrics(gold, pred), pred

    def score(self, metrics: dict[str, dict[str, float]]) -> float:
        return sum(m["f1"] for m in metrics.values()) / len(metrics)

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.outputs(batch)


# ---------------------------------------------------------------------------- feature-based


class WordFeatureExtractor(pl.LightningModule):
    """The frozen encoder as a predictor: each word's first-sub-token hidden states of `layers`,
    [words, len(layers), hidden] float16 per batch. Run by `Trainer.predict`, so the one Trainer
    builder's accelerator and precision apply (eval mode, no gradients)."""

    def __init__(self, encoder: BertModel, layers: Sequence[int]):
        super().__init__()
        self.encoder, self.layers = encoder, list(layers)

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        states = hidden_states(
            self.encoder, batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
        stacked = torch.stack([states[i] for i in self.layers], dim=2)  # [B, T, K, H]
        return stacked[batch["first"]].half()


class WordFeatures(Dataset):
    """Sentences of cached word features [words, K, H] with their label ids."""

    def __init__(self, features: torch.Tensor, lengths: Sequence[int], labels: Sequence[int]):
        if features.shape[0] != sum(lengths) or len(labels) != sum(lengths):
            raise ValueError(
                f"{features.shape[0]} word features and {len(labels)} labels for "
                f"{sum(lengths)} words"
            )
        starts = torch.tensor([0, *lengths]).cumsum(0).tolist()
        self.spans = list(zip(starts[:-1], starts[1:], strict=True))
        self.features = features
        self.labels = torch.as_tensor(labels, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self.spans[i]
        return self.features[start:end], self.labels[start:end]

    @staticmethod
    def collate(rows: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
        lengths = torch.tensor([len(labels) for _, labels in rows])
        width = int(lengths.max())
        k, h = rows[0][0].shape[1:]
        feats = torch.zeros(len(rows), width, k, h)
        labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
        for i, (f, y) in enumerate(rows):
            feats[i, : len(y)] = f.float()
            labels[i, : len(y)] = y
        first = torch.arange(width)[None] < lengths[:, None]
        return {"features": feats, "lengths": lengths, "labels": labels, "first": first}


class FeatureTagger(nn.Module):
    """Layer choice -> two-layer BiLSTM (`width` per direction) -> linear, per word.

    `weighted_sum_all` learns softmax-normalised layer weights and a scale (ELMo's scalar mix);
    the other choices are fixed functions of the cached layers.
    """

    def __init__(
        self, choice: str, layers: int, hidden: int, width: int, num_labels: int, dropout: float
    ):
        super().__init__()
        self.choice = choice
        if choice == "weighted_sum_all":
            self.layer_weights = nn.Parameter(torch.zeros(layers))
            self.gamma = nn.Parameter(torch.ones(()))
        size = hidden * layers if choice == "concat_last_four" else hidden
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(
            size, width, num_layers=2, bidirectional=True, batch_first=True, dropout=dropout
        )
        self.classifier = nn.Linear(2 * width, num_labels)

    def mix(self, features: torch.Tensor) -> torch.Tensor:
        """[B, S, K, H] cached layers -> [B, S, input size]."""
        if self.choice == "concat_last_four":
            return features.flatten(2)
        if self.choice == "weighted_sum_all":
            weights = torch.softmax(self.layer_weights, 0)
            return self.gamma * (features * weights[:, None]).sum(2)
        return features.sum(2)  # one layer, or sum_last_four

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.mix(features))
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return self.classifier(self.dropout(out))


class FeatureNerModule(NerModule):
    """A trial of the feature-based tagger (only the BiLSTM and classifier train)."""

    def logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model(batch["features"], batch["lengths"])
