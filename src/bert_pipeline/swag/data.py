"""SWAG files to one example table, and the split of a single labelled file.

SWAG's own files are `train.csv`, `val.csv` and `test.csv` (columns `video-id, fold-ind,
startphrase, sent1, sent2, gold-source, ending0..ending3, label`; `test.csv` has no label); the
JSON-lines form (`sent1, sent2, ending0..3, label` per line) is what transformers' test fixture
ships. Columns of the table: id, context (`sent1`, sentence A), start (`sent2`, the beginning of
sentence B that every ending completes), ending0..ending3, label (0-3; -1 unlabelled).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

N_CHOICES = 4
ENDINGS = [f"ending{k}" for k in range(N_CHOICES)]
COLUMNS = ["id", "context", "start", *ENDINGS, "label"]
UNLABELLED = -1


class SwagDataError(ValueError):
    """A SWAG file that cannot be used; the message names the file and the line."""


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _row(record: dict, where: str, labelled: bool) -> dict:
    """One checked table row from a file's record."""
    if not isinstance(record, dict):
        raise SwagDataError(f"{where}: not an example (a JSON object of sent1, sent2, ending0-3)")
    if not _text(record.get("sent1")).strip():
        raise SwagDataError(f"{where}: empty context (sent1)")
    row = {"context": _text(record["sent1"]), "start": _text(record.get("sent2"))}
    for name in ENDINGS:
        ending = _text(record.get(name))
        if not ending.strip():
            raise SwagDataError(f"{where}: {name} is missing")
        row[name] = ending
    label = record.get("label")
    if not labelled:
        row["label"] = UNLABELLED
        return row
    try:
        row["label"] = int(str(label))
    except ValueError:
        row["label"] = None
    if row["label"] not in range(N_CHOICES):
        raise SwagDataError(f"{where}: label {str(label)!r} is not one of 0-{N_CHOICES - 1}")
    return row


def read_swag(path: str | Path, labels: bool = True) -> pd.DataFrame:
    """The example table of one SWAG file: `.csv` (SWAG's own) or `.json`/`.jsonl` (one
    example per line). With `labels=False` (SWAG's `test.csv`) a file may have no `label`
    column; every other file must label every example."""
    path = Path(path)
    if not path.is_file():
        raise SwagDataError(f"SWAG file {path} does not exist")
    if path.suffix == ".csv":
        # blank lines kept as rows, so that a row's number is its line's (SWAG's texts hold
        # no line breaks); a blank row is then an example without a context
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False)
        missing = {"sent1", "sent2", *ENDINGS} - set(frame.columns)
        if missing:
            raise SwagDataError(f"{path}: no column(s) {sorted(missing)} (not a SWAG CSV)")
        labelled = "label" in frame.columns
        if labels and not labelled:
            raise SwagDataError(f"{path}: no label column (only SWAG's test.csv may lack one)")
        records = [(i + 2, r) for i, r in enumerate(frame.to_dict("records"))]  # 1: header
    elif path.suffix in (".json", ".jsonl"):
        records = []
        for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
            if line.strip():
                try:
                    records.append((number, json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise SwagDataError(f"{path} line {number}: not JSON ({exc.msg})") from None
        labelled = True
    else:
        raise SwagDataError(f"{path}: a SWAG file is .csv, .json or .jsonl")
    if not records:
        raise SwagDataError(f"{path}: no examples")
    rows = [
        {"id": f"{path.stem}-{k}", **_row(r, f"{path} line {n}", labelled)}
        for k, (n, r) in enumerate(records)
    ]
    return pd.DataFrame(rows, columns=COLUMNS).astype({"label": "int64"})


def split_by_context(
    frame: pd.DataFrame, dev_share: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, dev) of one labelled file: whole contexts go to dev, drawn with `seed`, until it
    holds at least `dev_share` of the examples (the last context may take it over), so no
    context of dev is seen in training (SWAG's own files repeat a context across examples)."""
    contexts = np.array(sorted(frame["context"].unique()))
    order = np.random.default_rng(seed).permutation(len(contexts))
    sizes = frame["context"].value_counts()
    # at least dev_share of the examples (rounded first: 0.07 * 100 is 7.000000000000001)
    want, taken, dev_contexts = math.ceil(round(dev_share * len(frame), 9)), 0, set()
    for k in order:
        if taken >= want:
            break
        dev_contexts.add(contexts[k])
        taken += int(sizes[contexts[k]])
    is_dev = frame["context"].isin(dev_contexts)
    if is_dev.all() or not is_dev.any():
        raise SwagDataError(
            f"finetune_swag.data.dev_share={dev_share} leaves no train or no dev example "
            f"({len(frame)} examples, {len(contexts)} contexts)"
        )
    return frame[~is_dev].reset_index(drop=True), frame[is_dev].reset_index(drop=True)
