"""Reads GLUE splits into one table layout, from glue_data TSV files or the Hugging Face hub.

Every split becomes a DataFrame with columns `task`, `split`, `idx` (int64, the id used in
leaderboard submissions), `text_a`, `text_b` (None for single-sentence tasks) and `label`
(class id as int64, STS-B score as float64; -1 in test splits, as the hub's convention).
"""

from __future__ import annotations

import csv
import logging
import math
import sys
from pathlib import Path
from typing import Literal

import pandas as pd

from bert_pipeline.data.hub import load_split
from bert_pipeline.glue.tasks import GlueTask, TsvLayout, get_task, hf_split

logger = logging.getLogger(__name__)

COLUMNS = ["task", "split", "idx", "text_a", "text_b", "label"]
OnBadRows = Literal["error", "skip"]
STSB_RANGE = (0.0, 5.0)

# Some glue_data fields (long MNLI parses) exceed csv's default 128 KiB field limit.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


class GlueDataError(ValueError):
    """A GLUE file or row that cannot be used; the message names the file/split and row."""


def is_test_split(split: str) -> bool:
    return split.startswith("test")


def parse_label(task: GlueTask, raw: str) -> int | float:
    """Class id for a label string, or the STS-B score; raises ValueError when out of space."""
    raw = raw.strip()
    if task.is_regression:
        score = float(raw)
        if not (STSB_RANGE[0] <= score <= STSB_RANGE[1]) or math.isnan(score):
            raise ValueError(f"score {raw!r} outside [0, 5]")
        return score
    if raw not in task.labels:
        raise ValueError(f"label {raw!r} not in the label space {list(task.labels)}")
    return task.labels.index(raw)


def _column(layout_key: str | int | None, header: dict[str, int] | None, path: Path):
    if layout_key is None or isinstance(layout_key, int):
        return layout_key
    assert header is not None
    if layout_key not in header:
        raise GlueDataError(
            f"{path}: header has no column {layout_key!r} (columns: {list(header)})"
        )
    return header[layout_key]


def _empty_frame(task: GlueTask) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": pd.Series(dtype=object),
            "split": pd.Series(dtype=object),
            "idx": pd.Series(dtype="int64"),
            "text_a": pd.Series(dtype=object),
            "text_b": pd.Series(dtype=object),
            "label": pd.Series(dtype="float64" if task.is_regression else "int64"),
        }
    )


def _frame(task: GlueTask, split: str, rows: list[tuple]) -> pd.DataFrame:
    if not rows:
        return _empty_frame(task)
    idx, text_a, text_b, label = zip(*rows, strict=True)
    return pd.DataFrame(
        {
            "task": task.name,
            "split": split,
            "idx": pd.Series(idx, dtype="int64"),
            "text_a": pd.Series(text_a, dtype=object),
            "text_b": pd.Series(text_b, dtype=object),
            "label": pd.Series(label, dtype="float64" if task.is_regression else "int64"),
        }
    )


def read_glue_tsv(
    path: str | Path, task: GlueTask | str, split: str, on_bad_rows: OnBadRows = "error"
) -> pd.DataFrame:
    """Reads one glue_data TSV file (csv.QUOTE_NONE: quotes are text, as in GLUE's own reader).

    A row with the wrong number of columns, an empty text or a label outside the task's label
    space raises GlueDataError naming `path:line`, or is skipped with a warning when
    `on_bad_rows="skip"` (useful for the few malformed rows of some QQP releases).
    """
    task = get_task(task) if isinstance(task, str) else task
    path = Path(path)
    layout: TsvLayout = task.files["test" if split == "test" else split]
    if not path.is_file():
        raise GlueDataError(f"missing split {split!r} of task {task.name!r}: no file {path}")
    rows: list[tuple] = []
    skipped = 0
    with path.open(encoding="utf-8-sig", newline="") as f:  # utf-8-sig drops MRPC's BOM
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = None
        ncols = layout.num_columns
        if layout.header:
            first = next(reader, None)
            if first is None:
                raise GlueDataError(f"{path}: empty file, expected a header line")
            header = {name: i for i, name in enumerate(first)}
            ncols = len(first)
        cols = [_column(k, header, path) for k in (layout.text_a, layout.text_b, layout.label)]
        i_a, i_b, i_label = cols
        i_index = _column(layout.index, header, path)
        for row_number, row in enumerate(reader):
            line = reader.line_num
            try:
                if ncols is not None and len(row) != ncols:
                    raise ValueError(f"{len(row)} columns, expected {ncols}")
                text_a = row[i_a].strip()
                text_b = row[i_b].strip() if i_b is not None else None
                if not text_a or (i_b is not None and not text_b):
                    raise ValueError("empty sentence")
                if i_label is None:
                    label = -1.0 if task.is_regression else -1
                else:
                    label = parse_label(task, row[i_label])
                idx = int(row[i_index]) if i_index is not None else row_number
            except ValueError as exc:
                if on_bad_rows == "skip":
                    skipped += 1
                    continue
                raise GlueDataError(f"{path}:{line}: bad {task.name} row: {exc}") from None
            rows.append((idx, text_a, text_b, label))
    if skipped:
        logger.warning("%s: skipped %d malformed rows", path, skipped)
    return _frame(task, split, rows)


def load_glue_tsv_task(
    root: str | Path, task: GlueTask | str, on_bad_rows: OnBadRows = "error"
) -> dict[str, pd.DataFrame]:
    """All splits of one task from a glue_data folder (`root/<TaskDir>/<split>.tsv`)."""
    task = get_task(task) if isinstance(task, str) else task
    folder = Path(root) / task.glue_dir
    if not folder.is_dir():
        raise GlueDataError(f"no folder {folder} for task {task.name!r} under {root}")
    return {
        split: read_glue_tsv(folder / f"{split}.tsv", task, split, on_bad_rows)
        for split in task.splits
    }


def _check_hf_frame(frame: pd.DataFrame, task: GlueTask, split: str, source: str) -> None:
    test = is_test_split(split)
    for column in ("text_a", "text_b") if task.is_pair else ("text_a",):
        empty = frame[column].isna() | (frame[column].astype(str).str.strip() == "")
        if empty.any():
            row = int(empty.to_numpy().argmax())
            raise GlueDataError(f"{source} row {row}: bad {task.name} row: empty sentence")
    labels = frame["label"]
    if test:
        bad = labels != -1
    elif task.is_regression:
        bad = ~labels.between(*STSB_RANGE)
    else:
        bad = ~labels.isin(range(task.num_labels))
    if bad.any():
        row = int(bad.to_numpy().argmax())
        space = (
            "-1 (test)"
            if test
            else (STSB_RANGE if task.is_regression else list(range(task.num_labels)))
        )
        raise GlueDataError(
            f"{source} row {row}: bad {task.name} row: label {labels.iloc[row].item()!r} "
            f"outside {space}"
        )


def hf_to_frame(raw: pd.DataFrame, task: GlueTask, split: str, source: str) -> pd.DataFrame:
    """Renames a hub-schema table (e.g. premise/hypothesis/label/idx) to our columns."""
    missing = [c for c in (*task.hf_text_columns, "label", "idx") if c not in raw.columns]
    if missing:
        raise GlueDataError(
            f"{source}: missing column(s) {missing} for task {task.name!r} "
            f"(columns: {list(raw.columns)})"
        )
    a = task.hf_text_columns[0]
    b = task.hf_text_columns[1] if task.is_pair else None
    frame = pd.DataFrame(
        {
            "task": task.name,
            "split": split,
            "idx": raw["idx"].astype("int64"),
            "text_a": raw[a].astype(object),
            "text_b": raw[b].astype(object) if b else pd.Series([None] * len(raw), dtype=object),
            "label": raw["label"].astype("float64" if task.is_regression else "int64"),
        }
    ).reset_index(drop=True)
    _check_hf_frame(frame, task, split, source)
    frame["text_a"] = frame["text_a"].str.strip()
    if b:
        frame["text_b"] = frame["text_b"].str.strip()
    return frame


def load_hf_task(
    task: GlueTask | str,
    path: str = "nyu-mll/glue",
    data_dir: str | Path | None = None,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
) -> dict[str, pd.DataFrame]:
    """All splits of one task through `datasets` (`cache_dir`: its cache, default HF's).

    With `data_dir`, reads local Parquet files in the hub repository's layout
    (`<data_dir>/<config>/<hf split>-*.parquet`, e.g. `rte/validation-00000-of-00001.parquet`),
    which is how the hub stores `nyu-mll/glue`; otherwise downloads `path`/`config`.
    """
    task = get_task(task) if isinstance(task, str) else task
    out = {}
    for split in task.splits:
        local = None if data_dir is None else Path(data_dir) / task.hf_config
        try:
            ds, source = load_split(
                path,
                hf_split(task, split),
                config=task.hf_config,
                data_dir=local,
                revision=revision,
                cache_dir=cache_dir,
            )
        except FileNotFoundError as exc:
            raise GlueDataError(f"missing split {split!r} of task {task.name!r}: {exc}") from None
        out[split] = hf_to_frame(ds.to_pandas(), task, split, source)
    return out
