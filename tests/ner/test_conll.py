"""Reading CoNLL-2003 (files and `datasets`), bad input, IOB1/IOB2, writing predictions."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from kedro.io.core import DatasetError

from bert_pipeline.io.conll_dataset import ConllDataset, ConllPredictionsDataset
from bert_pipeline.ner.config import CONLL_LABELS
from bert_pipeline.ner.conll import (
    NerDataError,
    iob1_to_iob2,
    iob2_to_iob1,
    parse_conll,
    read_conll,
    write_conll,
)
from bert_pipeline.schemas.ner import sentences
from tests.conftest import PROJECT_ROOT
from tests.ner.helpers import conll_text, write_conll_folder


def test_documents_sentences_and_schema(tmp_path):
    frames = ConllDataset(CONLL_LABELS, path=str(write_conll_folder(tmp_path))).load()
    assert {k: len(v) for k, v in frames.items()} == {"train": 40, "dev": 12, "test": 12}
    train = frames["train"]
    sentences.validate(train)
    assert train["doc"].tolist() == [i // 5 for i in range(40)]  # 5 sentences per document
    assert train["sentence"].tolist() == list(range(40))
    assert all(len(t) == len(g) for t, g in zip(train["tokens"], train["tags"], strict=True))


def test_iob1_files_read_as_iob2_and_written_back(tmp_path):
    iob2 = parse_conll(conll_text(30, "x").splitlines(), "dev", CONLL_LABELS, "IOB2", "a")
    iob1_lines = conll_text(30, "x", scheme="IOB1").splitlines()
    iob1_tags = [line.split()[-1] for line in iob1_lines if line]
    assert "I-PER" in iob1_tags and not any(t.startswith("B-") for t in iob1_tags)
    iob1 = parse_conll(iob1_lines, "dev", CONLL_LABELS, "IOB1", "b")
    pd.testing.assert_frame_equal(iob1, iob2)
    text = write_conll(iob1, iob1["tags"].tolist(), "IOB1")
    gold = [line.split()[-1] for line in iob1_lines if line and not line.startswith("-DOC")]
    assert [line.split()[1] for line in text.splitlines() if line and "DOCSTART" not in line] == (
        gold
    )
    tags = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "I-ORG"]
    assert iob2_to_iob1(tags) == ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "I-ORG"]
    assert iob1_to_iob2(iob2_to_iob1(tags)) == tags


def test_predictions_dataset_writes_the_files_scheme(tmp_path):
    """The catalog's predictions go back out in the scheme the files were read in."""
    folder = write_conll_folder(tmp_path / "c", scheme="IOB1")
    dev = ConllDataset(CONLL_LABELS, path=str(folder), scheme="IOB1").load()["dev"]
    out = ConllPredictionsDataset(str(tmp_path / "dev.conll"), scheme="IOB1")
    out.save(dev.assign(predicted=dev["tags"]))
    lines = (folder / "valid.txt").read_text().splitlines()
    original = [line.split()[-1] for line in lines if line]
    written = [line.split() for line in out.load().splitlines() if line]
    assert [w[1] for w in written] == original  # gold
    assert [w[2] for w in written] == original  # predicted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "dev.conll"]  # no temporary left
    with pytest.raises(DatasetError, match="scheme 'BIO' is not one of"):
        ConllPredictionsDataset(str(tmp_path / "x.conll"), scheme="BIO")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("Kelbridge NNP B-LOC", r"bad\.txt:4: expected 4 columns .* got 3"),
        ("Kelbridge NNP B-NP B-CITY", r"bad\.txt:4: unknown tag 'B-CITY'"),
        ("Kelbridge NNP B-NP I-LOC", r"bad\.txt:4: I-LOC after B-PER is not IOB2.*IOB1"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, line, message):
    good = "-DOCSTART- -X- -X- O\n\nMara NNP B-NP B-PER\n"
    path = tmp_path / "bad.txt"
    path.write_text(good + line + "\n\n", encoding="utf-8")
    with pytest.raises(NerDataError, match=message):
        read_conll(path, "train", CONLL_LABELS)


def test_missing_file_and_empty_file(tmp_path):
    with pytest.raises(NerDataError, match="missing CoNLL file"):
        read_conll(tmp_path / "nope.txt", "train", CONLL_LABELS)
    (tmp_path / "empty.txt").write_text("-DOCSTART- -X- -X- O\n\n", encoding="utf-8")
    with pytest.raises(NerDataError, match="empty.txt: no sentences"):
        read_conll(tmp_path / "empty.txt", "train", CONLL_LABELS)


def test_hf_layout_through_datasets(tmp_path):
    """eriktks/conll2003's columns (tokens, ner_tags ids), read from local Parquet files."""
    files = ConllDataset(CONLL_LABELS, path=str(write_conll_folder(tmp_path / "c"))).load()
    hub = tmp_path / "hub"
    hub.mkdir()
    names = {"train": "train", "dev": "validation", "test": "test"}
    for split, frame in files.items():
        rows = [{"id": "0", "tokens": ["-DOCSTART-"], "ner_tags": [0]}]
        for doc, group in frame.groupby("doc"):
            if doc:
                rows.append({"id": "d", "tokens": ["-DOCSTART-"], "ner_tags": [0]})
            for tokens, tags in zip(group["tokens"], group["tags"], strict=True):
                ids = [CONLL_LABELS.index(t) for t in tags]
                rows.append({"id": "s", "tokens": list(tokens), "ner_tags": ids})
        pd.DataFrame(rows).to_parquet(hub / f"{names[split]}-00000-of-00001.parquet")
    loaded = ConllDataset(CONLL_LABELS, source="hf", hf_data_dir=str(hub)).load()
    for split in files:
        pd.testing.assert_frame_equal(loaded[split], files[split])


def test_the_real_conll2003_reads_and_validates(shared_data):
    frames = ConllDataset(CONLL_LABELS, path=str(shared_data / "conll2003")).load()
    assert {k: len(v) for k, v in frames.items()} == {"train": 14041, "dev": 3250, "test": 3453}
    for frame in frames.values():
        sentences.validate(frame)
    assert int(frames["train"]["tokens"].map(len).sum()) == 203621


def test_conf_labels_are_the_code_default():
    """The catalog and parameters read conf/base's tags, code without Kedro CONLL_LABELS: one list,
    in the class-id order a saved NER model's head depends on."""
    labels = yaml.safe_load((PROJECT_ROOT / "conf/base/globals.yml").read_text())["ner_labels"]
    assert labels == CONLL_LABELS
