"""Pandera schema of the training history table (pretrain_bert -> plot_loss_curve)."""

from __future__ import annotations

import pandera.pandas as pa

TrainingHistorySchema = pa.DataFrameSchema(
    {
        "step": pa.Column("int64", pa.Check.ge(0)),
        "metric": pa.Column(str, pa.Check.str_length(min_value=1)),
        "value": pa.Column("float64", nullable=True),
    },
    strict=True,
    coerce=True,
    name="TrainingHistorySchema",
)
