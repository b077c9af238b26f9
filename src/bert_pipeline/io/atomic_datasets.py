"""kedro-datasets' Parquet, JSON, CSV and text datasets, saved atomically on local disk.

The file is written to a hidden sibling and renamed over the target, so a reader (another run,
a later node, a crash) sees the previous file or the new one, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io.core import get_filepath_str
from kedro_datasets.json import JSONDataset
from kedro_datasets.pandas import CSVDataset, ParquetDataset
from kedro_datasets.text import TextDataset

from bert_pipeline.fsutil import read_path, temporary_sibling, write_path


class _AtomicSave:
    _atomic_tmp: PurePosixPath | None = None

    def _get_save_path(self) -> PurePosixPath:
        if self._atomic_tmp:
            return self._atomic_tmp
        return self._staged(super()._get_save_path(), write_path)

    def _get_load_path(self) -> PurePosixPath:
        return self._staged(super()._get_load_path(), read_path)

    def _staged(self, path: PurePosixPath, where) -> PurePosixPath:
        """`path`, or its staging path while a data run stages it (fsutil.StagedSet)."""
        if self._protocol != "file":
            return path
        return PurePosixPath(where(get_filepath_str(path, self._protocol)).as_posix())

    def save(self, data: Any) -> None:
        if self._protocol != "file":  # object stores write whole objects anyway
            super().save(data)
            return
        target = self._get_save_path()
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        self._atomic_tmp = PurePosixPath(temporary_sibling(target).as_posix())
        tmp = get_filepath_str(self._atomic_tmp, self._protocol)
        try:
            super().save(data)
            os.replace(tmp, get_filepath_str(target, self._protocol))
        finally:
            self._atomic_tmp = None
            if os.path.exists(tmp):
                os.remove(tmp)


class AtomicParquetDataset(_AtomicSave, ParquetDataset):
    """`pandas.ParquetDataset`, saved atomically."""


class AtomicJSONDataset(_AtomicSave, JSONDataset):
    """`json.JSONDataset`, saved atomically."""


class AtomicCSVDataset(_AtomicSave, CSVDataset):
    """`pandas.CSVDataset`, saved atomically."""


class AtomicTextDataset(_AtomicSave, TextDataset):
    """`text.TextDataset`, saved atomically."""
