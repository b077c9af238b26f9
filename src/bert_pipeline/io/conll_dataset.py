"""Kedro dataset of the NER pipelines: CoNLL-2003 splits, from files or through `datasets`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from kedro.io.core import AbstractDataset, DatasetError

from bert_pipeline.data.hub import load_split
from bert_pipeline.io.atomic_datasets import AtomicTextDataset
from bert_pipeline.ner.conll import SCHEMES, NerDataError, read_conll, table_from_hf, write_conll

SOURCES = ("conll", "hf")
SPLITS = ("train", "dev", "test")


def _check_scheme(scheme: str) -> None:
    if scheme not in SCHEMES:
        raise DatasetError(f"CoNLL scheme {scheme!r} is not one of {SCHEMES}")


class ConllDataset(AbstractDataset[None, dict[str, pd.DataFrame]]):
    """{train, dev, test: sentence table} (see bert_pipeline.ner.conll).

    `source: conll` reads `<path>/<files[split]>` in CoNLL format (`scheme`: the files' IOB1 or
    IOB2); `source: hf` reads `hf_path` (eriktks/conll2003-style: tokens + ner_tags class ids in
    `labels`' order) through `datasets`, from the hub or, with `hf_data_dir`, from local Parquet
    files `<hf_data_dir>/<hf split>-*.parquet`. An empty string counts as not given.

    Example catalog entry::

        conll_raw:
          type: bert_pipeline.io.conll_dataset.ConllDataset
          path: data/01_raw/conll_sample
          labels: [O, B-PER, I-PER, B-ORG, I-ORG, B-LOC, I-LOC, B-MISC, I-MISC]
    """

    def __init__(
        self,
        labels: list[str],
        path: str | None = None,
        source: str = "conll",
        scheme: str = "IOB2",
        files: dict[str, str] | None = None,
        hf_path: str = "eriktks/conll2003",
        hf_data_dir: str | None = None,
        hf_splits: dict[str, str] | None = None,
        metadata: dict[str, Any] | None = None,
    ):
        if source not in SOURCES:
            raise DatasetError(f"CoNLL source {source!r} is not one of {SOURCES}")
        _check_scheme(scheme)
        if source == "conll" and not path:
            raise DatasetError("a conll ConllDataset needs `path` (the folder of the files)")
        self._labels = list(labels)
        self._path = path
        self._source = source
        self._scheme = scheme
        self._files = files or {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}
        self._hf_path = hf_path
        self._hf_data_dir = hf_data_dir or None
        self._hf_splits = hf_splits or {"train": "train", "dev": "validation", "test": "test"}
        self.metadata = metadata

    def load(self) -> dict[str, pd.DataFrame]:
        if self._source == "conll":
            return {
                split: read_conll(
                    Path(self._path) / self._files[split], split, self._labels, self._scheme
                )
                for split in SPLITS
            }
        return {split: self._load_hf(split) for split in SPLITS}

    def _load_hf(self, split: str) -> pd.DataFrame:
        name = self._hf_splits[split]
        try:
            ds, source = load_split(self._hf_path, name, data_dir=self._hf_data_dir)
        except FileNotFoundError as exc:
            raise NerDataError(str(exc)) from None
        names = getattr(ds.features.get("ner_tags"), "feature", None)
        if names is not None and getattr(names, "names", None) not in (None, self._labels):
            raise NerDataError(
                f"{source}: the dataset's tags {names.names} differ from the labels {self._labels}"
            )
        return table_from_hf(ds.to_pandas(), split, self._labels, source)

    def save(self, data: None) -> None:
        raise DatasetError("ConllDataset is read-only")

    def _exists(self) -> bool:
        if self._source == "conll":
            return all((Path(self._path) / f).is_file() for f in self._files.values())
        return self._hf_data_dir is None or Path(self._hf_data_dir).is_dir()

    def _describe(self) -> dict[str, Any]:
        path = self._path if self._source == "conll" else self._hf_data_dir or self._hf_path
        return {"source": self._source, "path": path, "scheme": self._scheme}


class ConllPredictionsDataset(AtomicTextDataset):
    """A sentence table with a `predicted` tag column, saved as `word gold predicted` lines in
    the files' tag scheme (conlleval's input); loads as that text.

    The scheme is set beside the reader's in the catalog, so predictions are written in the
    scheme the files were read in.
    """

    def __init__(self, filepath: str, scheme: str = "IOB2", **kwargs: Any):
        _check_scheme(scheme)
        super().__init__(filepath=filepath, **kwargs)
        self._scheme = scheme

    def save(self, data: pd.DataFrame) -> None:
        super().save(write_conll(data, data["predicted"].tolist(), self._scheme))

    def _describe(self) -> dict[str, Any]:
        return super()._describe() | {"scheme": self._scheme}
