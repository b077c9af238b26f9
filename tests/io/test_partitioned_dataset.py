"""All-or-nothing saves of the sharded pretraining examples."""

from __future__ import annotations

import pandas as pd
import pytest
from kedro.io import DatasetError

from bert_pipeline.io.partitioned_dataset import AtomicPartitionedDataset


def _dataset(path) -> AtomicPartitionedDataset:
    return AtomicPartitionedDataset(
        path=str(path), dataset="pandas.ParquetDataset", filename_suffix=".parquet", overwrite=True
    )


def _loaded(ds: AtomicPartitionedDataset) -> dict[str, pd.DataFrame]:
    return {k: load() for k, load in ds.load().items()}


def test_save_replaces_the_folder(tmp_path):
    ds = _dataset(tmp_path / "examples")
    ds.save({"part-00000": pd.DataFrame({"x": [1]}), "part-00001": pd.DataFrame({"x": [2]})})
    ds.save({"part-00000": pd.DataFrame({"x": [3]})})
    loaded = _loaded(_dataset(tmp_path / "examples"))
    assert list(loaded) == ["part-00000"]
    assert loaded["part-00000"]["x"].tolist() == [3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["examples"]


def test_failed_save_keeps_the_previous_partitions(tmp_path):
    ds = _dataset(tmp_path / "examples")
    ds.save({"part-00000": pd.DataFrame({"x": [1]}), "part-00001": pd.DataFrame({"x": [2]})})

    def broken_shard() -> pd.DataFrame:
        raise RuntimeError("shard 1 failed")

    with pytest.raises(DatasetError, match="shard 1 failed"):
        ds.save({"part-00000": pd.DataFrame({"x": [9]}), "part-00001": broken_shard})
    loaded = _loaded(_dataset(tmp_path / "examples"))
    assert {k: v["x"].tolist() for k, v in loaded.items()} == {
        "part-00000": [1],
        "part-00001": [2],
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["examples"]


def test_failed_first_save_leaves_nothing(tmp_path):
    def broken_shard() -> pd.DataFrame:
        raise RuntimeError("no data")

    with pytest.raises(DatasetError):
        _dataset(tmp_path / "examples").save({"part-00000": broken_shard})
    assert list(tmp_path.iterdir()) == []
