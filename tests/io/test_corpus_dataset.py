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
