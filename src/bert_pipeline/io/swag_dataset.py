"""Kedro dataset of the SWAG pipeline: SWAG's own CSV files, or one JSON-lines file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from kedro.io.core import AbstractDataset, DatasetError

from bert_pipeline.swag.data import SwagDataError, read_swag

SPLIT_FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}


class SwagDataset(AbstractDataset[None, dict[str, pd.DataFrame]]):
    """{split: example table} (see bert_pipeline.swag.data).

    `path` a folder of SWAG's files: `train.csv`, `val.csv` (dev) and, if present, `test.csv`
    (unlabelled: the leaderboard's test set); or one labelled `.csv`/`.json`/`.jsonl` file,
    loaded as {"all": table}, which the pipeline splits into train and dev by context.

    Example catalog entry::

        swag.raw:
          type: bert_pipeline.io.swag_dataset.SwagDataset
          path: /data/swagaf/data
    """

    def __init__(self, path: str, metadata: dict[str, Any] | None = None):
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> dict[str, pd.DataFrame]:
        if self._path.is_file():
            return {"all": read_swag(self._path)}
        if not self._path.is_dir():
            raise SwagDataError(f"SWAG data {self._path} does not exist (runtime param swag_dir)")
        missing = [f for s, f in SPLIT_FILES.items() if s != "test" and not self._file(s).is_file()]
        if missing:
            raise SwagDataError(f"SWAG folder {self._path} has no {', '.join(missing)}")
        return {
            split: read_swag(self._file(split), labels=split != "test")
            for split in SPLIT_FILES
            if self._file(split).is_file()
        }

    def _file(self, split: str) -> Path:
        return self._path / SPLIT_FILES[split]

    def save(self, data: None) -> None:
        raise DatasetError("SwagDataset is read-only")

    def _exists(self) -> bool:
        return self._path.is_file() or self._file("train").is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}
