"""SWAG readers (CSV, JSON lines), their errors, and the split of one file by context."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bert_pipeline.io.swag_dataset import SwagDataset
from bert_pipeline.schemas.swag import examples as examples_schema
from bert_pipeline.swag.data import SwagDataError, read_swag, split_by_context
from tests.swag.helpers import swag_rows, write_swag_csvs, write_swag_jsonl

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "01_raw" / "swag_sample" / "sample.jsonl"
# the bundled sample's dev set under split_seed 0 (six contexts of two examples each)
SEED_0_DEV = [f"sample-{k}" for k in (8, 9, 10, 11, 12, 13, 18, 19, 20, 21, 32, 33)]


def test_csv_folder_reads_train_val_and_unlabelled_test(tmp_path: Path):
    raw = SwagDataset(str(write_swag_csvs(tmp_path / "swag"))).load()
    assert {k: len(v) for k, v in raw.items()} == {"train": 24, "dev": 8, "test": 5}
    for table in raw.values():
        examples_schema.validate(table)
    first = pd.read_csv(tmp_path / "swag" / "train.csv").iloc[0]
    row = raw["train"].iloc[0]
    assert (row["context"], row["start"], row["ending2"]) == (
        first["sent1"],
        first["sent2"],
        first["ending2"],
    )
    assert row["label"] == first["label"] and (raw["test"]["label"] == -1).all()


def test_jsonl_file_is_one_labelled_table(tmp_path: Path):
    path = write_swag_jsonl(tmp_path / "sample.jsonl", swag_rows(6))
    raw = SwagDataset(str(path)).load()
    assert list(raw) == ["all"] and raw["all"]["id"].tolist() == [f"sample-{k}" for k in range(6)]
    assert raw["all"]["label"].between(0, 3).all()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"ending2": ""}, r"line 4: ending2 is missing"),
        ({"label": 4}, r"line 4: label '4' is not one of 0-3"),
        ({"label": "x"}, r"line 4: label 'x' is not one of 0-3"),
        ({"sent1": "  "}, r"line 4: empty context \(sent1\)"),
    ],
)
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_bad_example_is_named_by_file_and_line(tmp_path: Path, edit: dict, message, suffix):
    rows = swag_rows(5)
    rows[2 if suffix == ".csv" else 3].update(edit)  # the CSV's line 1 is its header
    path = tmp_path / f"train{suffix}"
    if suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        write_swag_jsonl(path, rows)
    with pytest.raises(SwagDataError, match=rf"train{suffix} {message}"):
        read_swag(path)


def test_a_folder_without_val_and_a_broken_json_line_are_named(tmp_path: Path):
    folder = write_swag_csvs(tmp_path / "swag")
    (folder / "val.csv").unlink()
    with pytest.raises(Exception, match=r"swag has no val.csv"):
        SwagDataset(str(folder)).load()
    path = write_swag_jsonl(tmp_path / "s.jsonl", swag_rows(3))
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(SwagDataError, match=r"s.jsonl line 4: not JSON"):
        read_swag(path)


def _assert_no_shared_context(frame: pd.DataFrame, dev_share: float, seed: int) -> None:
    train, dev = split_by_context(frame, dev_share, seed)
    assert len(train) + len(dev) == len(frame) and len(dev) >= dev_share * len(frame)
    assert not set(train["context"]) & set(dev["context"])


def test_the_bundled_sample_splits_without_a_dev_context_in_train():
    frame = read_swag(BUNDLED)
    assert frame["context"].duplicated().any()  # contexts repeat, as in SWAG
    for seed in range(5):
        _assert_no_shared_context(frame, 0.3, seed)
    _, dev = split_by_context(frame, 0.3, 0)
    assert dev["id"].tolist() == SEED_0_DEV  # the split is the seed's alone


def test_the_shared_sample_splits_without_a_dev_context_in_train(shared_data: Path):
    """transformers' 10-example fixture repeats sent1 (examples 2 and 4, 9 and 10)."""
    path = shared_data / "swag" / "sample.json"
    frame = read_swag(path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[1]["sent1"] == records[3]["sent1"] and records[8]["sent1"] == records[9]["sent1"]
    for seed in range(10):
        _assert_no_shared_context(frame, 0.3, seed)


def test_a_dev_share_that_takes_everything_is_refused():
    frame = pd.DataFrame({"context": ["same"] * 4, "id": list("abcd")})
    with pytest.raises(SwagDataError, match=r"dev_share=0.5 leaves no train or no dev"):
        split_by_context(frame, 0.5, 0)


def test_every_file_but_test_csv_must_be_labelled(tmp_path: Path):
    folder = write_swag_csvs(tmp_path / "swag")
    frame = pd.read_csv(folder / "val.csv").drop(columns="label")
    frame.to_csv(folder / "val.csv", index=False)
    with pytest.raises(Exception, match=r"val.csv: no label column \(only SWAG's test.csv"):
        SwagDataset(str(folder)).load()


def test_a_blank_line_and_a_json_line_that_is_no_example_are_named(tmp_path: Path):
    path = tmp_path / "train.csv"
    pd.DataFrame(swag_rows(4)).to_csv(path, index=False)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:3], "", *lines[3:]]) + "\n")
    with pytest.raises(SwagDataError, match=r"train.csv line 4: empty context"):
        read_swag(path)
    jsonl = write_swag_jsonl(tmp_path / "s.jsonl", swag_rows(2))
    jsonl.write_text(jsonl.read_text() + "[1, 2]\n")
    with pytest.raises(SwagDataError, match=r"s.jsonl line 3: not an example"):
        read_swag(jsonl)


def test_dev_share_is_a_floor_without_float_error():
    frame = pd.DataFrame({"context": [f"c{k}" for k in range(100)], "id": range(100)})
    assert len(split_by_context(frame, 0.07, 0)[1]) == 7  # 0.07 * 100 = 7.000000000000001
