"""SWAG examples to BERT inputs: per choice `[CLS] context [SEP] start ending [SEP]`, as the
paper (sentence A the given sentence, B the start of the next plus one ending)."""

from __future__ import annotations

import pandas as pd
import torch
from tokenizers import Tokenizer
from torch.utils.data import Dataset

from bert_pipeline.glue.features import encode_table
from bert_pipeline.swag.data import ENDINGS
from bert_pipeline.training.finetune import pad_rows


def encode_choices(
    tokenizer: Tokenizer, frame: pd.DataFrame, max_seq_length: int
) -> list[list[dict[str, list[int]]]]:
    """Per example, the encoded pair of each choice (truncated longest-first, as BERT)."""
    pairs = pd.DataFrame(
        {
            "text_a": frame["context"].repeat(len(ENDINGS)).to_numpy(),
            "text_b": [
                f"{start} {ending}".strip()
                for start, *endings in frame[["start", *ENDINGS]].itertuples(index=False)
                for ending in endings
            ],
        }
    )
    rows = encode_table(tokenizer, pairs, max_seq_length)
    return [rows[i : i + len(ENDINGS)] for i in range(0, len(rows), len(ENDINGS))]


class SwagFeatures(Dataset):
    """Encoded examples (a row per choice) and their labels (-1 unlabelled)."""

    def __init__(self, encoded: list[list[dict[str, list[int]]]], labels: list[int]):
        if len(encoded) != len(labels):
            raise ValueError(f"{len(encoded)} encoded examples for {len(labels)} labels")
        self.encoded, self.labels = encoded, list(labels)

    def __len__(self) -> int:
        return len(self.encoded)

    def __getitem__(self, i: int) -> dict:
        return {"choices": self.encoded[i], "label": self.labels[i]}

    def collate(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        """[batch, choices, longest row of the batch], padded with [PAD]=0."""
        rows = [c for e in examples for c in e["choices"]]
        shape = (len(examples), len(examples[0]["choices"]), -1)
        return {
            "input_ids": pad_rows([r["input_ids"] for r in rows]).view(shape),
            "token_type_ids": pad_rows([r["token_type_ids"] for r in rows]).view(shape),
            "attention_mask": pad_rows([[1] * len(r["input_ids"]) for r in rows]).view(shape),
            "labels": torch.tensor([e["label"] for e in examples], dtype=torch.long),
        }
