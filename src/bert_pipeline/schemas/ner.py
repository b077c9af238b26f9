"""Pandera schema of the NER sentence tables (catalog `validator: ...schemas.ner.sentences`).

One row per sentence: tokens and IOB2 tags of equal, non-zero length; the label set itself
is a parameter (`finetune_ner.labels`), checked against the tags by the reading code.
"""

from __future__ import annotations

import re

import pandas as pd
import pandera.pandas as pa

_TAG = re.compile(r"^(O|[BI]-\S+)$")


def _same_length(frame: pd.DataFrame) -> pd.Series:
    return frame["tokens"].map(len) == frame["tags"].map(len)


sentences = pa.DataFrameSchema(
    {
        "split": pa.Column(str, pa.Check.isin(["train", "dev", "test"])),
        "doc": pa.Column("int64", pa.Check.ge(0)),
        "sentence": pa.Column("int64", pa.Check.ge(0), unique=True),
        "tokens": pa.Column(object, pa.Check(lambda s: s.map(len) > 0, error="empty sentence")),
        "tags": pa.Column(
            object,
            pa.Check(lambda s: s.map(lambda t: all(_TAG.match(x) for x in t)), error="IOB tag"),
        ),
    },
    checks=pa.Check(_same_length, error="tokens and tags differ in length"),
    strict=True,
    name="ner_sentences",
)
