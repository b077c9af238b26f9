"""Sentence tables to BERT windows: WordPiece alignment and document packing.

Every word's label goes on its first sub-token; later sub-tokens, [CLS], [SEP] and padding get
-100 and are ignored, as in the paper. Consecutive sentences of a document are packed into one
`[CLS] ... [SEP]` window of at most `max_seq_length` tokens (the paper's "maximal document
context"); a sentence longer than a window is cut at word boundaries. Windows keep the order of
the words, so the first-sub-token predictions of a split, in order, are its words in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from tokenizers import Tokenizer

from bert_pipeline.data.tokenizer import CLS, SEP, UNK, special_token_ids
from bert_pipeline.model.bert import IGNORE_INDEX
from bert_pipeline.training.finetune import Windows, pad_rows


def word_pieces(tokenizer: Tokenizer, sentences: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Per sentence, per word, its WordPiece ids ([UNK] for a word the tokenizer drops)."""
    unk = special_token_ids(tokenizer)[UNK]
    tokenizer.no_truncation()
    tokenizer.no_padding()
    encodings = tokenizer.encode_batch(
        [list(s) for s in sentences], is_pretokenized=True, add_special_tokens=False
    )
    out = []
    for sentence, encoding in zip(sentences, encodings, strict=True):
        words: list[list[int]] = [[] for _ in sentence]
        for piece, word in zip(encoding.ids, encoding.word_ids, strict=True):
            words[word].append(piece)
        out.append([w or [unk] for w in words])
    return out


@dataclass
class Window:
    input_ids: list[int]
    labels: list[int]  # the word's label id on first sub-tokens, IGNORE_INDEX elsewhere
    first: list[bool]  # True on first sub-tokens: where a word's prediction is read


def _chunks(words: list[list[int]], budget: int) -> list[list[list[int]]]:
    """A sentence's words in runs of at most `budget` pieces (a longer word is cut)."""
    runs, run, size = [], [], 0
    for pieces in words:
        pieces = pieces[:budget]
        if run and size + len(pieces) > budget:
            runs.append(run)
            run, size = [], 0
        run.append(pieces)
        size += len(pieces)
    if run:
        runs.append(run)
    return runs


def build_windows(
    tokenizer: Tokenizer,
    frame: pd.DataFrame,
    label2id: Mapping[str, int],
    max_seq_length: int,
    pack: bool,
) -> list[Window]:
    """Windows of a sentence table (see the module docstring); `pack=False`: one per sentence."""
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be >= 3, got {max_seq_length}")
    ids = special_token_ids(tokenizer)
    cls_id, sep_id = ids[CLS], ids[SEP]
    budget = max_seq_length - 2
    pieces = word_pieces(tokenizer, frame["tokens"].tolist())
    windows: list[Window] = []
    current: list[tuple[list[int], int]] = []  # (pieces, label id) of the open window's words
    size, doc = 0, None

    def close() -> None:
        nonlocal size
        if current:
            ids, labels, first = [cls_id], [IGNORE_INDEX], [False]
            for word, label in current:
                ids += word
                labels += [label] + [IGNORE_INDEX] * (len(word) - 1)
                first += [True] + [False] * (len(word) - 1)
            windows.append(Window([*ids, sep_id], [*labels, IGNORE_INDEX], [*first, False]))
            current.clear()
            size = 0

    for words, tags, d in zip(pieces, frame["tags"], frame["doc"], strict=True):
        labelled = list(zip(words, (label2id[t] for t in tags), strict=True))
        n = sum(len(w[:budget]) for w in words)
        if not pack or d != doc or size + n > budget:
            close()
        doc = d
        offset = 0
        for run in _chunks(words, budget):
            if size + sum(len(w) for w in run) > budget:
                close()
            labels = [label for _, label in labelled[offset : offset + len(run)]]
            current.extend(zip(run, labels, strict=True))
            size += sum(len(w) for w in run)
            offset += len(run)
    close()
    return windows


class NerFeatures(Windows):
    """Windows of one split, plus its sentence lengths (to cut the word predictions back)."""

    def __init__(self, windows: list[Window], sentence_lengths: Sequence[int]):
        super().__init__(windows)
        self.sentence_lengths = list(sentence_lengths)

    @staticmethod
    def collate(rows: list[Window]) -> dict[str, torch.Tensor]:
        """Pads to the longest window of the batch ([PAD]=0, labels IGNORE_INDEX)."""
        ids = pad_rows([r.input_ids for r in rows])
        return {
            "input_ids": ids,
            "token_type_ids": torch.zeros_like(ids),
            "attention_mask": pad_rows([[1] * len(r.input_ids) for r in rows]),
            "labels": pad_rows([r.labels for r in rows], IGNORE_INDEX),
            "first": pad_rows([r.first for r in rows]).bool(),
        }


def encode_split(
    tokenizer: Tokenizer,
    frame: pd.DataFrame,
    label2id: Mapping[str, int],
    max_seq_length: int,
    pack: bool,
) -> NerFeatures:
    windows = build_windows(tokenizer, frame, label2id, max_seq_length, pack)
    return NerFeatures(windows, [len(t) for t in frame["tokens"]])


def split_words(flat: Sequence, lengths: Sequence[int]) -> list[list]:
    """A split's word-level values, in order, cut back into sentences."""
    if len(flat) != sum(lengths):
        raise ValueError(f"{len(flat)} word predictions for {sum(lengths)} words")
    out, start = [], 0
    for n in lengths:
        out.append(list(flat[start : start + n]))
        start += n
    return out
