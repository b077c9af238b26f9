"""The Parquet folders of the data stages: one task per partition on the cluster."""

from __future__ import annotations

import dask.dataframe as dd
import pandas as pd
from distributed import get_task_stream

from bert_pipeline.data.cluster import close_client, open_client
from bert_pipeline.io.dask_parquet_dataset import DaskParquetDataset


def _part(k: int) -> pd.DataFrame:
    return pd.DataFrame({"x": range(10 * k, 10 * k + 10)})


def _double(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(x=frame["x"] * 2)


def test_each_partition_is_written_by_one_task(tmp_path):
    """Client.compute runs a collection's graph unfused: a task per step of each partition (22
    tasks here: read, double, double, write, ...), each waiting for a scheduler round trip."""
    frame = dd.from_map(_part, range(3)).map_partitions(_double).map_partitions(_double)
    dataset = DaskParquetDataset(str(tmp_path / "table"))
    client = open_client({"n_workers": 1})
    try:
        with get_task_stream() as stream:
            dataset.save(frame)
    finally:
        close_client(client)
    assert len(stream.data) == 3 + 1  # a task per partition, and the barrier that ends the write
    assert dataset.load().compute()["x"].tolist() == [4 * i for i in range(30)]
