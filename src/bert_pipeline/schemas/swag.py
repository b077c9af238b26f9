"""Pandera schema of the SWAG example tables (catalog `validator: ...schemas.swag.examples`).

The reader already names the file and line of a bad example; this guards the tables between
nodes: unique ids, non-empty contexts and endings, labels 0-3 (-1 for the unlabelled test set).
"""

from __future__ import annotations

import pandera.pandas as pa

from bert_pipeline.swag.data import ENDINGS, N_CHOICES, UNLABELLED

_text = pa.Check(lambda s: s.str.strip().str.len() > 0, error="empty text")

examples = pa.DataFrameSchema(
    {
        "id": pa.Column(str, unique=True),
        "context": pa.Column(str, _text),
        "start": pa.Column(str),
        **{name: pa.Column(str, _text) for name in ENDINGS},
        "label": pa.Column(int, pa.Check.in_range(UNLABELLED, N_CHOICES - 1)),
    },
    strict=True,
    name="swag_examples",
)
