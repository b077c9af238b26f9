"""The raw corpus as a catalog dataset."""

from __future__ import annotations

import pandas as pd
import pytest
from kedro.io import DatasetError

from bert_pipeline.data.corpus import ingest_documents
from bert_pipeline.io.corpus_dataset import CorpusDataset


def test_loads_the_documents_table(prose_folder):
    ds = CorpusDataset(kind="prose_folder", path=str(prose_folder), max_documents=3)
    docs = ds.load().compute()
    expected = ingest_documents({"kind": "prose_folder", "path": str(prose_folder)}).head(3)
    pd.testing.assert_frame_equal(docs.astype(object), expected.astype(object))
    assert "max_documents=3" in str(ds)


def test_is_read_only_and_names_bad_sources(prose_folder, tmp_path):
    ds = CorpusDataset(kind="prose_folder", path=str(prose_folder))
    with pytest.raises(DatasetError, match="read-only"):
        ds.save(pd.DataFrame())
    with pytest.raises(DatasetError, match=r"nowhere does not exist .*pretrain_corpus.path"):
        CorpusDataset(kind="prose_folder", path=str(tmp_path / "nowhere")).load()


def test_an_empty_corpus_is_named_when_it_is_loaded(tmp_path):
    """Files with blank text only: the error names the path, kind and files when the corpus is
    loaded, not after the documents table was written."""
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "a.txt").write_text(" \n\n\t\n", encoding="utf-8")
    (tmp_path / "blank" / "b.txt").write_text("\n", encoding="utf-8")
    ds = CorpusDataset(kind="prose_folder", path=str(tmp_path / "blank"))
    with pytest.raises(
        DatasetError,
        match=rf"corpus source {tmp_path / 'blank'} \(prose_folder, files \['\*.txt', .*\]\) "
        "yielded no non-empty documents",
    ):
        ds.load()
