"""The bundled samples measure generalisation: no dev or test item is also a train item.

Read through the project's own datasets (what a default run loads), so the check sees the
texts exactly as training and evaluation do.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from bert_pipeline.io.conll_dataset import ConllDataset
from bert_pipeline.io.glue_dataset import GlueRawDataset
from bert_pipeline.io.squad_dataset import SquadDataset
from bert_pipeline.io.swag_dataset import SwagDataset
from bert_pipeline.swag.config import swag_params
from bert_pipeline.swag.data import split_by_context
from tests.conftest import PROJECT_ROOT

RAW = PROJECT_ROOT / "data" / "01_raw"
GLUE_TASKS = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_finetune_glue.yml").read_text())[
    "finetune_glue"
]["tasks"]


def leaked(splits: dict[str, pd.DataFrame], key) -> dict[str, list]:
    """Per evaluation split, its items (by `key(row)`) that train also holds."""
    train = {key(row) for row in splits["train"].itertuples()}
    return {
        split: [k for k in (key(row) for row in frame.itertuples()) if k in train]
        for split, frame in splits.items()
        if split != "train"
    }


def test_no_ner_dev_or_test_sentence_is_in_train():
    labels = yaml.safe_load((PROJECT_ROOT / "conf/base/globals.yml").read_text())["ner_labels"]
    splits = ConllDataset(labels, path=str(RAW / "conll_sample")).load()
    assert set(splits) == {"train", "dev", "test"}
    assert leaked(splits, lambda row: tuple(row.tokens)) == {"dev": [], "test": []}


@pytest.mark.parametrize("task", GLUE_TASKS)
def test_no_glue_dev_or_test_pair_is_in_train(task):
    splits = GlueRawDataset(task, path=str(RAW / "glue_sample")).load()
    found = leaked(splits, lambda row: (row.text_a, row.text_b))
    assert found == {split: [] for split in splits if split != "train"}


def test_no_squad_dev_question_is_in_train():
    splits = SquadDataset(
        path=str(RAW / "squad_sample"), files={"train": "train.json", "dev": "dev.json"}
    ).load()
    assert leaked(splits, lambda row: row.question) == {"dev": []}


def test_no_swag_dev_context_is_in_train():
    """The bundled sample is one file: the run's own split must keep each context on one side."""
    params = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_finetune_swag.yml").read_text())
    data = swag_params(params["finetune_swag"]).data
    (frame,) = SwagDataset(str(RAW / "swag_sample" / "sample.jsonl")).load().values()
    train, dev = split_by_context(frame, data.dev_share, data.split_seed)
    assert leaked({"train": train, "dev": dev}, lambda row: row.context) == {"dev": []}
