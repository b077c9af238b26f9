"""GLUE tables to BERT inputs: `[CLS] A [SEP] (B [SEP])`, truncated longest-first as BERT."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from tokenizers import Tokenizer
from torch.utils.data import Dataset

from bert_pipeline.data.tokenizer import CLS, SEP, special_token_ids
from bert_pipeline.training.finetune import pad_rows


def _truncate_pair(a: list[int], b: list[int], max_tokens: int) -> tuple[list[int], list[int]]:
    """Drops tokens from the end of the longer sequence until both fit (BERT's way)."""
    a, b = list(a), list(b)
    while len(a) + len(b) > max_tokens:
        (a if len(a) > len(b) else b).pop()
    return a, b


def encode_table(
    tokenizer: Tokenizer, frame: pd.DataFrame, max_seq_length: int
) -> list[dict[str, list[int]]]:
    """Token ids and segment ids for every row, special tokens added here (not by the tokenizer)."""
    if max_seq_length < 4:
        raise ValueError(f"max_seq_length must be >= 4, got {max_seq_length}")
    ids = special_token_ids(tokenizer)
    cls_id, sep_id = ids[CLS], ids[SEP]
    tokenizer.no_truncation()
    tokenizer.no_padding()
    a_ids = [
        e.ids for e in tokenizer.encode_batch(frame["text_a"].tolist(), add_special_tokens=False)
    ]
    has_b = frame["text_b"].notna().tolist()
    b_texts = [t for t, present in zip(frame["text_b"], has_b, strict=True) if present]
    b_iter = iter(e.ids for e in tokenizer.encode_batch(b_texts, add_special_tokens=False))
    out = []
    for a, pair in zip(a_ids, has_b, strict=True):
        if pair:
            a, b = _truncate_pair(a, next(b_iter), max_seq_length - 3)
            ids = [cls_id, *a, sep_id, *b, sep_id]
            types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        else:
            a = a[: max_seq_length - 2]
            ids = [cls_id, *a, sep_id]
            types = [0] * len(ids)
        out.append({"input_ids": ids, "token_type_ids": types})
    return out


class GlueFeatures(Dataset):
    """Encoded rows plus labels (class ids, STS-B scores, or -1 for test)."""

    def __init__(self, encoded: Sequence[dict[str, list[int]]], labels: Sequence, regression: bool):
        if len(encoded) != len(labels):
            raise ValueError(f"{len(encoded)} encoded rows for {len(labels)} labels")
        self.encoded = encoded
        self.labels = list(labels)
        self.regression = regression

    def __len__(self) -> int:
        return len(self.encoded)

    def __getitem__(self, i: int) -> dict:
        return {**self.encoded[i], "label": self.labels[i]}

    def collate(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        """Pads to the longest row of the batch with [PAD]=0."""
        dtype = torch.float32 if self.regression else torch.long
        return {
            "input_ids": pad_rows([r["input_ids"] for r in rows]),
            "token_type_ids": pad_rows([r["token_type_ids"] for r in rows]),
            "attention_mask": pad_rows([[1] * len(r["input_ids"]) for r in rows]),
            "labels": torch.tensor([r["label"] for r in rows], dtype=dtype),
        }
