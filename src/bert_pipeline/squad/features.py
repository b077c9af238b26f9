"""Questions to BERT windows: `[CLS] question [SEP] context span [SEP]` with doc-stride.

A context longer than fits is cut into spans that share `doc_stride` tokens (transformers'
meaning of the word; google's script steps by it instead), as transformers' run_qa.py builds
them, so both sides see the same windows. A training window is labelled with the token span of
the question's first answer if the span lies wholly inside it, else with [CLS] (position 0),
which is also the label of v2.0's unanswerable questions.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from tokenizers import Tokenizer

from bert_pipeline.data.tokenizer import CLS, SEP, special_token_ids
from bert_pipeline.training.finetune import Windows, pad_rows


@dataclass
class Window:
    input_ids: list[int]
    token_type_ids: list[int]
    start: int  # answer start token (0: [CLS], no answer in this window)
    end: int
    example: int  # row of the question table
    offsets: list[tuple[int, int] | None]  # context character span of each token, else None


def answer_tokens(
    offsets: list[tuple[int, int] | None], start_char: int, end_char: int
) -> tuple[int, int]:
    """The first and last token of the characters [start_char, end_char) in a window whose
    context tokens have `offsets` (None elsewhere), or (0, 0) when the window does not hold
    them all: run_qa.py's rule."""
    context = [i for i, o in enumerate(offsets) if o is not None]
    first, last = context[0], context[-1]
    if not (offsets[first][0] <= start_char and offsets[last][1] >= end_char):
        return 0, 0
    start = first
    while start <= last and offsets[start][0] <= start_char:
        start += 1
    end = last
    while end >= first and offsets[end][1] >= end_char:
        end -= 1
    return start - 1, end + 1


def build_windows(
    tokenizer: Tokenizer,
    frame: pd.DataFrame,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
) -> list[Window]:
    """Every question's windows, in table order."""
    ids = special_token_ids(tokenizer)
    cls_id, sep_id = ids[CLS], ids[SEP]
    tokenizer.no_truncation()
    tokenizer.no_padding()
    questions = tokenizer.encode_batch(frame["question"].tolist(), add_special_tokens=False)
    contexts = tokenizer.encode_batch(frame["context"].tolist(), add_special_tokens=False)
    windows = []
    for row, (q, c, texts, starts, impossible) in enumerate(
        zip(
            questions,
            contexts,
            frame["answer_texts"],
            frame["answer_starts"],
            frame["is_impossible"],
            strict=True,
        )
    ):
        query = q.ids[:max_query_length]
        budget = max_seq_length - len(query) - 3
        if budget <= doc_stride:
            raise ValueError(
                f"max_seq_length={max_seq_length} leaves {budget} context tokens per window, "
                f"not more than doc_stride={doc_stride}"
            )
        head = [cls_id, *query, sep_id]
        begin = 0
        while True:
            ids = c.ids[begin : begin + budget]
            span = [tuple(o) for o in c.offsets[begin : begin + budget]]
            offsets = [None] * len(head) + span + [None]
            start = end = 0
            if len(texts) and not impossible:
                start_char = int(starts[0])
                start, end = answer_tokens(offsets, start_char, start_char + len(texts[0]))
            windows.append(
                Window(
                    input_ids=[*head, *ids, sep_id],
                    token_type_ids=[0] * len(head) + [1] * (len(ids) + 1),
                    start=start,
                    end=end,
                    example=row,
                    offsets=offsets,
                )
            )
            if begin + budget >= len(c.ids):
                break
            begin += budget - doc_stride
    return windows


class SquadFeatures(Windows):
    """The windows of one split."""

    @staticmethod
    def collate(rows: list[Window]) -> dict[str, torch.Tensor]:
        """Pads to the longest window of the batch with [PAD]=0."""
        ids = pad_rows([r.input_ids for r in rows])
        mask = pad_rows([[1] * len(r.input_ids) for r in rows])
        return {
            "input_ids": ids,
            "token_type_ids": pad_rows([r.token_type_ids for r in rows]),
            "attention_mask": mask,
            "start_positions": torch.tensor([r.start for r in rows]),
            "end_positions": torch.tensor([r.end for r in rows]),
            "lengths": mask.sum(1),
        }
