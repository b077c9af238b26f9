"""Kedro datasets of the GLUE pipeline: raw task data (TSV or hub) and the submission zip."""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd
from kedro.io.core import AbstractDataset, DatasetError

from bert_pipeline.glue.loading import load_glue_tsv_task, load_hf_task
from bert_pipeline.glue.tasks import get_task

SOURCES = ("glue_tsv", "hf")


class GlueRawDataset(AbstractDataset[None, dict[str, pd.DataFrame]]):
    """All splits of one GLUE task as {split: DataFrame} (columns: see bert_pipeline.glue.loading).

    `source: glue_tsv` reads `<path>/<TaskDir>/<split>.tsv` (the original glue_data layout);
    `source: hf` reads the `nyu-mll/glue` dataset (`hf_path`) through `datasets`, from the hub
    or, with `hf_data_dir`, from local Parquet files in the hub's layout
    (`<hf_data_dir>/<config>/<split>-*.parquet`). An empty string counts as not given.

    Example catalog entry (one per task through a dataset factory)::

        "{task}.glue_raw":
          type: bert_pipeline.io.glue_dataset.GlueRawDataset
          task: "{task}"
          path: data/01_raw/glue_sample
    """

    def __init__(
        self,
        task: str,
        path: str | None = None,
        source: str = "glue_tsv",
        hf_path: str = "nyu-mll/glue",
        hf_data_dir: str | None = None,
        hf_revision: str | None = None,
        hf_cache_dir: str | None = None,
        on_bad_rows: str = "error",
        metadata: dict[str, Any] | None = None,
    ):
        self._task = get_task(task)
        if source not in SOURCES:
            raise DatasetError(f"GLUE source {source!r} is not one of {SOURCES}")
        if source == "glue_tsv" and not path:
            raise DatasetError("a glue_tsv GlueRawDataset needs `path` (the glue_data folder)")
        if on_bad_rows not in ("error", "skip"):
            raise DatasetError(f"on_bad_rows must be 'error' or 'skip', got {on_bad_rows!r}")
        self._path = path
        self._source = source
        self._hf_path = hf_path
        self._hf_data_dir = hf_data_dir or None
        self._hf_revision = hf_revision
        self._hf_cache_dir = hf_cache_dir or None
        self._on_bad_rows = on_bad_rows
        self.metadata = metadata

    def load(self) -> dict[str, pd.DataFrame]:
        if self._source == "glue_tsv":
            return load_glue_tsv_task(self._path, self._task, self._on_bad_rows)
        return load_hf_task(
            self._task, self._hf_path, self._hf_data_dir, self._hf_revision, self._hf_cache_dir
        )

    def save(self, data: None) -> None:
        raise DatasetError("GlueRawDataset is read-only")

    def _exists(self) -> bool:
        if self._source == "glue_tsv":
            return (Path(self._path) / self._task.glue_dir).is_dir()
        folder = self._hf_data_dir
        return folder is None or (Path(folder) / self._task.hf_config).is_dir()

    def _describe(self) -> dict[str, Any]:
        path = self._path if self._source == "glue_tsv" else self._hf_data_dir or self._hf_path
        return {"task": self._task.name, "source": self._source, "path": path}


class ZipDataset(AbstractDataset[dict[str, str], dict[str, str]]):
    """A zip archive of text files, {name: text}; written to a temp file, then renamed."""

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> dict[str, str]:
        with zipfile.ZipFile(self._filepath) as archive:
            return {n: archive.read(n).decode("utf-8") for n in archive.namelist()}

    def save(self, data: dict[str, str]) -> None:
        self._filepath.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self._filepath.name}.", dir=self._filepath.parent)
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                for name in sorted(data):  # fixed timestamps: same content, same bytes
                    info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    archive.writestr(info, data[name])
            os.replace(tmp, self._filepath)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    def _exists(self) -> bool:
        return self._filepath.is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(PurePosixPath(self._filepath))}
