"""Kedro dataset for a partitioned Parquet table read and written with Dask, all or nothing.

Loading is lazy (`dask.dataframe.read_parquet`); saving computes the frame on the current Dask
client, partition by partition, into a temporary sibling folder that replaces the target only
when every partition is written (kedro-datasets' `dask.ParquetDataset` writes in place, so a
failed run would leave half a table that the next run reads as whole).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask.dataframe as dd
from kedro.io.core import AbstractDataset

from bert_pipeline.data.cluster import compute
from bert_pipeline.fsutil import atomic_directory, read_path, recover_directory, write_path


class DaskParquetDataset(AbstractDataset[dd.DataFrame, dd.DataFrame]):
    """A folder of Parquet files, one per partition.

    Example catalog entry::

        pretrain_sentences:
          type: bert_pipeline.io.dask_parquet_dataset.DaskParquetDataset
          path: data/03_primary/pretrain_sentences
          load_args: {calculate_divisions: true}   # keep a sorted index's divisions
    """

    def __init__(
        self,
        path: str,
        load_args: dict[str, Any] | None = None,
        save_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._path = Path(path)
        self._load_args = dict(load_args or {})
        self._save_args = dict(save_args or {})
        self.metadata = metadata

    def load(self) -> dd.DataFrame:
        path = read_path(self._path)
        recover_directory(path)
        return dd.read_parquet(str(path), **self._load_args)

    def save(self, data: dd.DataFrame) -> None:
        path = write_path(self._path)
        recover_directory(path)
        with atomic_directory(path) as tmp:
            write = data.to_parquet(str(tmp), compute=False, **self._save_args)
            compute(f"write {self._path.name}", [write])

    def _exists(self) -> bool:
        return read_path(self._path).is_dir()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "load_args": self._load_args}
