"""Kedro dataset of the SQuAD pipeline: train and dev questions, from the official JSON files
or through `datasets`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from kedro.io.core import AbstractDataset, DatasetError

from bert_pipeline.data.hub import load_split
from bert_pipeline.squad.data import SquadDataError, read_squad, table_from_hf

SOURCES = ("json", "hf")
SPLITS = ("train", "dev")


class SquadDataset(AbstractDataset[None, dict[str, pd.DataFrame]]):
    """{train, dev: question table} (see bert_pipeline.squad.data).

    `source: json` reads the official files `<path>/<files[split]>` (v1.1 or v2.0, told apart
    by `is_impossible`); `source: hf` reads `hf_path` (rajpurkar/squad or squad_v2) through
    `datasets`, from the hub or, with `hf_data_dir`, from local Parquet files
    `<hf_data_dir>/<hf split>-*.parquet`. An empty string counts as not given.

    Example catalog entry::

        squad_raw:
          type: bert_pipeline.io.squad_dataset.SquadDataset
          path: ../shared/data/squad
          files: {train: train-v1.1-slice.json, dev: dev-v1.1.json}
    """

    def __init__(
        self,
        path: str | None = None,
        files: dict[str, str] | None = None,
        source: str = "json",
        hf_path: str = "rajpurkar/squad",
        hf_data_dir: str | None = None,
        hf_splits: dict[str, str] | None = None,
        metadata: dict[str, Any] | None = None,
    ):
        if source not in SOURCES:
            raise DatasetError(f"SQuAD source {source!r} is not one of {SOURCES}")
        if source == "json" and not path:
            raise DatasetError("a json SquadDataset needs `path` (the folder of the files)")
        self._path = path
        self._files = files or {"train": "train-v1.1.json", "dev": "dev-v1.1.json"}
        self._source = source
        self._hf_path = hf_path
        self._hf_data_dir = hf_data_dir or None
        self._hf_splits = hf_splits or {"train": "train", "dev": "validation"}
        self.metadata = metadata

    def load(self) -> dict[str, pd.DataFrame]:
        if self._source == "json":
            return {s: read_squad(Path(self._path) / self._files[s]) for s in SPLITS}
        return {s: self._load_hf(s) for s in SPLITS}

    def _load_hf(self, split: str) -> pd.DataFrame:
        name = self._hf_splits[split]
        try:
            ds, source = load_split(self._hf_path, name, data_dir=self._hf_data_dir)
        except FileNotFoundError as exc:
            raise SquadDataError(str(exc)) from None
        return table_from_hf(ds.to_pandas(), source)

    def save(self, data: None) -> None:
        raise DatasetError("SquadDataset is read-only")

    def _exists(self) -> bool:
        if self._source == "json":
            return all((Path(self._path) / f).is_file() for f in self._files.values())
        return self._hf_data_dir is None or Path(self._hf_data_dir).is_dir()

    def _describe(self) -> dict[str, Any]:
        path = self._path if self._source == "json" else self._hf_data_dir or self._hf_path
        return {"source": self._source, "path": path, "files": self._files}
