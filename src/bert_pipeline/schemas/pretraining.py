"""Pandera schemas of the pretraining data tables, enforced by Kedro's catalog `validator:` key.

Checks here are the ones that hold for every configuration. Checks that depend on parameters
(sequences no longer than `max_seq_length`, ids below the vocabulary size) cannot be expressed
here, because a catalog validator's options are static YAML that cannot read parameters; the
`create_examples` node enforces those (`check_examples_against_parameters`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pyarrow as pa_arrow
import pyarrow.compute as pc
from pandera.typing import Series


class DocumentsSchema(pa.DataFrameModel):
    """One row per raw document."""

    doc_id: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})
    source: Series[str]
    text: Series[str] = pa.Field(str_contains=r"\S")
    layout: Series[str] = pa.Field(isin=["sentences", "prose"])

    class Config:
        strict = True


class SentencesSchema(pa.DataFrameModel):
    """One row per sentence, grouped by document and in order."""

    doc_id: Series[str] = pa.Field(str_length={"min_value": 1})
    sentence_index: Series[np.int32] = pa.Field(ge=0)
    text: Series[str] = pa.Field(str_contains=r"\S")

    class Config:
        strict = True
        unique = ["doc_id", "sentence_index"]

    @pa.dataframe_check(
        error="rows of a document are not contiguous with sentence_index 0, 1, 2..."
    )
    @classmethod
    def contiguous_documents(cls, df: pd.DataFrame) -> Series[bool]:
        doc = df["doc_id"].to_numpy(dtype=object)
        new_doc = np.ones(len(doc), dtype=bool)
        new_doc[1:] = doc[1:] != doc[:-1]
        run = np.cumsum(new_doc) - 1
        run_start = np.flatnonzero(new_doc)
        expected = np.arange(len(doc)) - run_start[run]
        ok = df["sentence_index"].to_numpy() == expected
        starts = pd.Series(doc[new_doc])
        if starts.duplicated().any():
            ok = ok & ~np.isin(doc, starts[starts.duplicated()].to_numpy())
        return pd.Series(ok, index=df.index)


def _arrow(df: pd.DataFrame, column: str) -> pa_arrow.ListArray:
    """The column as one Arrow list array: no copy for a shard's Arrow-backed columns."""
    return pa_arrow.array(df[column])


def _rows_ok(n: int, bad_rows: np.ndarray) -> np.ndarray:
    ok = np.ones(n, dtype=bool)
    ok[np.asarray(bad_rows, dtype=np.int64)] = False
    return ok


def _example_row_checks(df: pd.DataFrame) -> pd.Series:
    """Per-row structural validity of examples, vectorized with pyarrow (no per-token loop)."""
    n = len(df)
    ids = _arrow(df, "input_ids")
    types = _arrow(df, "token_type_ids")
    pos = _arrow(df, "masked_lm_positions")
    lab = _arrow(df, "masked_lm_ids")
    length = pc.list_value_length(ids).to_numpy(zero_copy_only=False)
    t_len = pc.list_value_length(types).to_numpy(zero_copy_only=False)
    ok = length >= 5
    ok &= t_len == length
    ok &= pc.list_value_length(lab).to_numpy(zero_copy_only=False) == pc.list_value_length(
        pos
    ).to_numpy(zero_copy_only=False)

    # token types are 0...0 1...1 with both parts non-empty; first [SEP] is at len_a + 1. Read
    # in their own dtype (int8 in a shard) and per row through the offsets: no per-token row
    # index or int64 copy of a shard's millions of tokens
    t_val = pc.list_flatten(types).to_numpy(zero_copy_only=False)
    t_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(t_len, out=t_start[1:])
    bad_value = np.flatnonzero((t_val < 0) | (t_val > 1))
    ok &= _rows_ok(n, np.searchsorted(t_start, bad_value, side="right") - 1)
    ones = np.zeros(n, dtype=np.int64)
    filled = t_len > 0
    ones[filled] = np.add.reduceat(t_val, t_start[:-1][filled], dtype=np.int32)  # 3x int64's speed
    descent = np.flatnonzero(t_val[1:] < t_val[:-1]) + 1  # a 0 right after a 1
    descent_row = np.searchsorted(t_start, descent, side="right") - 1
    ok &= _rows_ok(n, descent_row[t_start[descent_row] != descent])  # not at a row's start
    n_zero = t_len - ones
    ok &= (n_zero >= 3) & (n_zero <= length - 2)
    first_sep = n_zero - 1

    p_val = pc.list_flatten(pos).to_numpy(zero_copy_only=False).astype(np.int64)
    p_row = pc.list_parent_indices(pos).to_numpy(zero_copy_only=False)
    if len(p_val):
        bad = (p_val <= 0) | (p_val >= length[p_row] - 1) | (p_val == first_sep[p_row])
        ok &= _rows_ok(n, p_row[bad])
        rising = np.diff(p_val) > 0
        ok &= _rows_ok(n, p_row[1:][(p_row[1:] == p_row[:-1]) & ~rising])
    return pd.Series(ok, index=df.index)


def _provenance_ok(df: pd.DataFrame) -> pd.Series:
    """IsNext pairs are consecutive sentences of one document; a label-1 B comes from another
    document, or (sentence order) is the segment just before A."""
    is_next = df["next_sentence_label"].to_numpy() == 0
    same_doc = df["a_doc_id"].to_numpy() == df["b_doc_id"].to_numpy()
    consecutive = df["b_sent_start"].to_numpy() == df["a_sent_end"].to_numpy()
    swapped = same_doc & (df["b_sent_end"].to_numpy() == df["a_sent_start"].to_numpy())
    ranges = (df["a_sent_start"] < df["a_sent_end"]) & (df["b_sent_start"] < df["b_sent_end"])
    ok = np.where(is_next, same_doc & consecutive, ~same_doc | swapped) & ranges.to_numpy()
    return pd.Series(ok, index=df.index)


ExamplesFrameSchema = pa.DataFrameSchema(
    {
        "example_id": pa.Column("int64", unique=True, checks=pa.Check.ge(0)),
        "input_ids": pa.Column(None),
        "token_type_ids": pa.Column(None),
        "masked_lm_positions": pa.Column(None),
        "masked_lm_ids": pa.Column(None),
        "next_sentence_label": pa.Column("int8", checks=pa.Check.isin([0, 1])),
        "a_doc_id": pa.Column(str),
        "b_doc_id": pa.Column(str),
        "a_sent_start": pa.Column("int32", checks=pa.Check.ge(0)),
        "a_sent_end": pa.Column("int32"),
        "b_sent_start": pa.Column("int32", checks=pa.Check.ge(0)),
        "b_sent_end": pa.Column("int32"),
        "a_truncated_tokens": pa.Column("int32", checks=pa.Check.ge(0), required=False),
        "b_truncated_tokens": pa.Column("int32", checks=pa.Check.ge(0), required=False),
    },
    checks=[
        pa.Check(
            _example_row_checks,
            error="example structure: [CLS] A [SEP] B [SEP] token types, masked positions "
            "sorted, unique, inside the sequence and not on [CLS]/[SEP]",
        ),
        pa.Check(
            _provenance_ok,
            error="IsNext must be consecutive in one document, random B from another document",
        ),
    ],
    strict=True,
    name="ExamplesSchema",
)


def _short_report(exc: pa.errors.SchemaErrors, where: str) -> str:
    """A few lines per failing check (check, count, up to 3 cases cut to 80 characters), never
    whole documents."""
    lines = [f"{where}: {exc.schema.name or 'schema'} failed"]
    cases = exc.failure_cases
    for (column, check), group in cases.groupby(["column", "check"], dropna=False, sort=False):
        shown = ", ".join(repr(str(v))[:80] for v in group["failure_case"].head(3))
        lines.append(f"  {column or 'frame'}: {check}: {len(group)} failure(s), e.g. {shown}")
    return "\n".join(lines)


def validate_frame(schema: Any, frame: pd.DataFrame, where: str) -> pd.DataFrame:
    try:
        return schema.validate(frame, lazy=True)
    except pa.errors.SchemaErrors as exc:
        raise ValueError(_short_report(exc, where)) from None


def _validate_partition(frame: pd.DataFrame, schema: Any, partition_info=None) -> pd.DataFrame:
    number = partition_info["number"] if partition_info else "?"
    return validate_frame(schema, frame, f"partition {number}")


class PartitionValidator:
    """Kedro validator for Dask frames: `schema` checks each partition on the worker that
    computes it (lazily, when the dataset saves); pandas frames are checked at once.

    Catalog: `validator: {class: bert_pipeline.schemas.pretraining.PartitionValidator,
    options: {schema: bert_pipeline.schemas.pretraining.SentencesSchema}}`. Checks across
    partitions (unique doc_id) are made by the stages themselves.
    """

    def __init__(self, schema: str) -> None:
        from kedro.utils import load_obj

        self.schema = load_obj(schema)

    def validate(self, data: Any) -> Any:
        if isinstance(data, pd.DataFrame):
            return validate_frame(self.schema, data, "table")
        return data.map_partitions(_validate_partition, self.schema, meta=data._meta)


def _lists_stay_arrow(dtype: pa_arrow.DataType) -> pd.ArrowDtype | None:
    return pd.ArrowDtype(dtype) if pa_arrow.types.is_list(dtype) else None


def _validate_shard(table: pa_arrow.Table, name: str) -> pa_arrow.Table:
    """The shard's list columns stay Arrow arrays in the frame: the row checks read them as
    Arrow, and a NumPy array per row and list column would cost more than the checks."""
    validate_frame(ExamplesFrameSchema, table.to_pandas(types_mapper=_lists_stay_arrow), name)
    return table


class ExamplesValidator:
    """Kedro validator for the example shards (`ExampleShards`) or one examples frame.

    Each shard is checked with `ExamplesFrameSchema` on the worker that builds it, before it is
    written; example_id is unique across shards by construction (shard * 2**32 + row).
    """

    def validate(self, data: Any) -> Any:
        from dask import delayed

        from bert_pipeline.data.shards import ExampleShards, shard_name

        if isinstance(data, pd.DataFrame):
            return validate_frame(ExamplesFrameSchema, data, "examples")
        if not isinstance(data, ExampleShards) or not data.parts:
            raise ValueError(f"expected ExampleShards with shards, got {type(data).__name__}")
        parts = [delayed(_validate_shard)(p, shard_name(k)) for k, p in enumerate(data.parts)]
        return dataclasses.replace(data, parts=parts)


def check_examples_against_parameters(
    table: pa_arrow.Table, max_seq_length: int, vocab_size: int
) -> None:
    """Parameter-dependent checks that a static catalog validator cannot express."""
    lengths = pc.list_value_length(table.column("input_ids")).to_numpy(zero_copy_only=False)
    if len(lengths) and lengths.max() > max_seq_length:
        row = int(np.argmax(lengths))
        raise ValueError(
            f"example row {row} has {lengths[row]} tokens, more than parameter "
            f"max_seq_length={max_seq_length}"
        )
    flat = pc.list_flatten(table.column("input_ids")).to_numpy(zero_copy_only=False)
    if len(flat) and (flat.max() >= vocab_size or flat.min() < 0):
        raise ValueError(f"token id outside [0, {vocab_size}) (tokenizer vocabulary size)")
