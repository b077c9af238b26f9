"""Every task's loader on synthetic fixtures, in the glue_data TSV layout and the hub's Parquet."""

from __future__ import annotations

import pandas as pd
import pytest

from bert_pipeline.glue.loading import load_glue_tsv_task, load_hf_task, read_glue_tsv
from bert_pipeline.glue.tasks import TASKS, get_task
from bert_pipeline.io.glue_dataset import GlueRawDataset
from bert_pipeline.schemas.glue import examples_schema
from tests.glue.helpers import examples, split_sizes, write_glue_tsv, write_hf_parquet


@pytest.fixture(scope="module")
def glue_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue")
    return write_glue_tsv(root / "glue_data"), write_hf_parquet(root / "hub"), root / "hf_cache"


@pytest.mark.parametrize("name", list(TASKS))
def test_tsv_and_hub_give_the_same_tables(glue_dirs, name):
    tsv_root, hub_root, cache = glue_dirs
    task = get_task(name)
    from_tsv = load_glue_tsv_task(tsv_root, name)
    from_hub = load_hf_task(name, data_dir=hub_root, cache_dir=cache)
    assert list(from_tsv) == list(task.splits) == list(from_hub)
    for split, n in split_sizes(task).items():
        frame = from_tsv[split]
        assert len(frame) == n
        expected = examples(task, split, n)
        assert frame["text_a"].tolist() == expected["text_a"].tolist()
        assert frame["label"].tolist() == pytest.approx(expected["label"].tolist())
        assert frame["idx"].tolist() == expected["idx"].tolist()
        pd.testing.assert_frame_equal(frame, from_hub[split], check_dtype=False)
        labeled = not split.startswith("test")
        examples_schema(task, labeled=labeled).validate(frame)


def test_quirks(glue_dirs):
    tsv_root, _, _ = glue_dirs
    mrpc = read_glue_tsv(tsv_root / "MRPC" / "train.tsv", "mrpc", "train")
    assert mrpc["text_a"].iloc[0] == 'He said "the harbour is quiet'  # BOM header, QUOTE_NONE
    cola = read_glue_tsv(tsv_root / "CoLA" / "dev.tsv", "cola", "dev")  # no header
    assert len(cola) == 8 and cola["text_b"].isna().all()
    mnli = load_glue_tsv_task(tsv_root, "mnli")
    assert set(mnli) == {
        "train",
        "dev_matched",
        "dev_mismatched",
        "test_matched",
        "test_mismatched",
    }
    assert mnli["dev_matched"]["label"].tolist()[:3] == [0, 1, 2]  # gold_label, not label1..5
    stsb = read_glue_tsv(tsv_root / "STS-B" / "train.tsv", "stsb", "train")
    assert stsb["label"].dtype == "float64" and stsb["label"].between(0, 5).all()
    qqp_test = read_glue_tsv(tsv_root / "QQP" / "test.tsv", "qqp", "test")
    assert qqp_test["idx"].tolist() == list(range(5)) and (qqp_test["label"] == -1).all()


def test_raw_dataset_both_sources(glue_dirs):
    tsv_root, hub_root, cache = glue_dirs
    tsv = GlueRawDataset(task="rte", path=str(tsv_root)).load()
    hub = GlueRawDataset(
        task="rte", source="hf", hf_data_dir=str(hub_root), hf_cache_dir=str(cache)
    ).load()
    for split in tsv:
        pd.testing.assert_frame_equal(tsv[split], hub[split], check_dtype=False)
