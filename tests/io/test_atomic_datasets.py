"""Catalog tables and JSON are replaced whole: a failed save keeps the previous file."""

from __future__ import annotations

import pandas as pd
import pytest
from kedro.io.core import DatasetError

from bert_pipeline.io.atomic_datasets import AtomicJSONDataset, AtomicParquetDataset


def test_a_failed_save_keeps_the_previous_file_and_leaves_no_temp(tmp_path):
    table = AtomicParquetDataset(filepath=str(tmp_path / "t.parquet"))
    table.save(pd.DataFrame({"a": [1, 2]}))
    with pytest.raises(DatasetError):
        table.save(pd.DataFrame({"a": [object()]}))  # pyarrow cannot write it
    pd.testing.assert_frame_equal(table.load(), pd.DataFrame({"a": [1, 2]}))

    record = AtomicJSONDataset(filepath=str(tmp_path / "r.json"))
    record.save({"ok": 1})
    with pytest.raises(DatasetError):
        record.save({"bad": object()})  # not JSON
    assert record.load() == {"ok": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "t.parquet"]
