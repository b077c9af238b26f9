"""Pandera schema of the SQuAD question tables (catalog `validator: ...schemas.squad.questions`).

The reader already checks every answer against its context and names the question id; this
schema guards the table between nodes: unique ids, non-empty texts, answer lists of equal
length, no answers exactly on unanswerable (v2.0) questions.
"""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa

_text = pa.Check(lambda s: s.str.strip().str.len() > 0, error="empty text")


def _answers_match(frame: pd.DataFrame) -> pd.Series:
    same = frame["answer_texts"].map(len) == frame["answer_starts"].map(len)
    impossible_empty = ~frame["is_impossible"] | (frame["answer_texts"].map(len) == 0)
    return same & impossible_empty


questions = pa.DataFrameSchema(
    {
        "id": pa.Column(str, unique=True),
        "title": pa.Column(str),
        "context": pa.Column(str, _text),
        "question": pa.Column(str, _text),
        "answer_texts": pa.Column(object),
        "answer_starts": pa.Column(object),
        "is_impossible": pa.Column(bool),
    },
    checks=pa.Check(_answers_match, error="answers and starts differ, or answers on impossible"),
    strict=True,
    name="squad_questions",
)
