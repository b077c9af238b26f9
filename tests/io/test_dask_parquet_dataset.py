"""The Parquet folders of the data stages: one task per partition on the cluster."""

from __future__ import annotations

import dask.dataframe as dd
import pandas as pd

from bert_pipeline.io import dask_parquet_dataset


def _part(k: int) -> pd.DataFrame:
    return pd.DataFrame({"x": range(10 * k, 10 * k + 10)})


def _double(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(x=frame["x"] * 2)


def test_each_partition_is_written_by_one_task(tmp_path, monkeypatch):
    """Client.compute runs the write's graph unfused: ~6 tasks a partition (read, convert,
    validate, reset_index, ...), each waiting for a scheduler round trip."""
    graphs = []

    def record(stage, tasks, names=None):
        graphs.extend(len(t.__dask_graph__()) for t in tasks)
        return [t.compute(scheduler="sync") for t in tasks]

    monkeypatch.setattr(dask_parquet_dataset, "compute", record)
    frame = dd.from_map(_part, range(3)).map_partitions(_double).map_partitions(_double)
    dataset = dask_parquet_dataset.DaskParquetDataset(str(tmp_path / "table"))
    dataset.save(frame)
    assert graphs == [3 + 1]  # a task per partition, and the barrier that ends the write
    assert dataset.load().compute()["x"].tolist() == [4 * i for i in range(30)]
