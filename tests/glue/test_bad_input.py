"""Bad input fails with an error naming the file, row or parameter."""

from __future__ import annotations

import pytest
from kedro.io.core import DatasetError

from bert_pipeline.glue.config import glue_params
from bert_pipeline.glue.loading import (
    GlueDataError,
    load_glue_tsv_task,
    load_hf_task,
    read_glue_tsv,
)
from bert_pipeline.glue.tasks import UnknownTaskError, get_task
from bert_pipeline.io.glue_dataset import GlueRawDataset
from bert_pipeline.model.checkpoint import (
    CheckpointMismatchError,
    check_checkpoint,
    tokenizer_from_checkpoint,
)
from bert_pipeline.pipelines.finetune_glue.nodes import task_config
from bert_pipeline.pipelines.finetune_glue.pipeline import create_pipeline
from tests.glue.helpers import tiny_checkpoint, write_glue_tsv, write_hf_parquet


@pytest.fixture
def rte_dir(tmp_path):
    return write_glue_tsv(tmp_path, tasks=["rte", "stsb", "cola"])


def _append(path, line):
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")


def test_unknown_task():
    with pytest.raises(UnknownTaskError, match=r"unknown GLUE task 'rtee'; choose one of cola"):
        get_task("rtee")
    with pytest.raises(UnknownTaskError, match=r"parameter finetune_glue.tasks: unknown GLUE task"):
        create_pipeline(tasks=["rte", "rtee"])
    with pytest.raises(UnknownTaskError):
        GlueRawDataset(task="rtee", path="x")


def test_pipeline_parameter_errors():
    with pytest.raises(ValueError, match="init_from_mnli=.*needs mnli in finetune_glue.tasks"):
        create_pipeline(tasks=["rte"], init_from_mnli=["rte"])
    with pytest.raises(ValueError, match="lists a task twice"):
        create_pipeline(tasks=["rte", "RTE"])
    with pytest.raises(ValueError, match=r"finetune_glue.hyperparameters.rte.lr: Key 'lr' not in"):
        task_config("rte", {"defaults": {}, "hyperparameters": {"rte": {"lr": 1.0}}})
    with pytest.raises(
        ValueError, match=r"finetune_glue.defaults.learning_rates=\[\] must be a non"
    ):
        task_config("rte", {"defaults": {"learning_rates": []}})
    with pytest.raises(ValueError, match=r"finetune_glue.hyperparameters.rte.epochs: Value 'x'"):
        task_config("rte", {"hyperparameters": {"rte": {"epochs": "x"}}})
    assert task_config("rte", {"defaults": {"learning_rates": ["5e-5"]}}).learning_rates == [5e-5]
    pooling = r"finetune_glue.hyperparameters.rte.classifier_pooling='max' must be one"
    with pytest.raises(ValueError, match=pooling):
        task_config("rte", {"hyperparameters": {"rte": {"classifier_pooling": "max"}}})
    with pytest.raises(ValueError, match=r"finetune_glue.hyperparameters.stsb.dropout=1.0 must be"):
        task_config("stsb", {"hyperparameters": {"stsb": {"dropout": 1.0}}})
    for grid in ([0.1, 0.1], [0.1, 0.1 + 1e-9], [0.1, "x"], [0.1, None], []):
        with pytest.raises(ValueError, match=r"defaults.dropout=.* must be null, a rate, or a"):
            task_config("stsb", {"defaults": {"dropout": grid}})
    with pytest.raises(ValueError, match=r"defaults.dropout=1.5 must be in \[0, 1\)"):
        task_config("stsb", {"defaults": {"dropout": [0.0, 1.5]}})
    mean = task_config("rte", {"defaults": {"classifier_pooling": "mean"}})
    assert mean.classifier_pooling == "mean"
    mixed = {"init_from_mnli": ["rte"], "hyperparameters": {"mnli": {"classifier_pooling": "mean"}}}
    with pytest.raises(ValueError, match=r"rte.classifier_pooling='cls' but init_from_mnli starts"):
        glue_params(mixed).task_configs(["mnli", "rte"])
    assert glue_params(mixed).task_configs(["mnli", "stsb"])["stsb"].classifier_pooling == "cls"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"taks": ["rte"]}, r"finetune_glue.taks: Key 'taks' not in 'GlueParams'"),
        ({"data": {"max_train": 10}}, r"finetune_glue.data.max_train: Key 'max_train'"),
        ({"data": {"sample_seed": "x"}}, r"finetune_glue.data.sample_seed: Value 'x'"),
        ({"defaults": {"pooling": "mean"}}, r"finetune_glue.defaults.pooling: Key 'pooling'"),
    ],
)
def test_every_finetune_glue_key_is_parsed(params, message):
    with pytest.raises(ValueError, match=message):
        glue_params(params).task_configs(["rte"])


def test_missing_split(rte_dir, tmp_path):
    (rte_dir / "RTE" / "dev.tsv").unlink()
    with pytest.raises(
        GlueDataError, match=r"missing split 'dev' of task 'rte': no file .*RTE/dev.tsv"
    ):
        load_glue_tsv_task(rte_dir, "rte")
    with pytest.raises(GlueDataError, match=r"no folder .*WNLI for task 'wnli'"):
        load_glue_tsv_task(rte_dir, "wnli")
    hub = write_hf_parquet(tmp_path / "hub", tasks=["rte"])
    (hub / "rte" / "validation-00000-of-00001.parquet").unlink()
    with pytest.raises(GlueDataError, match=r"missing split 'dev' of task 'rte': no validation-\*"):
        load_hf_task("rte", data_dir=hub, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize(
    ("task_dir", "line", "message"),
    [
        ("RTE", "99\tonly two\tcolumns", r"RTE/train.tsv:18: bad rte row: 3 columns, expected 4"),
        (
            "RTE",
            "99\tA.\tB.\tmaybe",
            r"train.tsv:18: bad rte row: label 'maybe' not in the label space",
        ),
        ("RTE", "99\t \tB.\tentailment", r"train.tsv:18: bad rte row: empty sentence"),
        (
            "STS-B",
            "99\tg\tf\ty\to\ts\ts\tA.\tB.\t7.5",
            r"train.tsv:18: bad stsb row: score '7.5' outside",
        ),
        (
            "CoLA",
            "gj04\t1\t\tA sentence.\textra",
            r"train.tsv:17: bad cola row: 5 columns, expected 4",
        ),
    ],
)
def test_malformed_rows(rte_dir, task_dir, line, message):
    path = rte_dir / task_dir / "train.tsv"
    _append(path, line)
    task = {"RTE": "rte", "STS-B": "stsb", "CoLA": "cola"}[task_dir]
    with pytest.raises(GlueDataError, match=message):
        read_glue_tsv(path, task, "train")
    skipped = read_glue_tsv(path, task, "train", on_bad_rows="skip")
    assert len(skipped) == 16


def test_hub_label_outside_label_space(tmp_path):
    import pandas as pd

    hub = write_hf_parquet(tmp_path / "hub", tasks=["rte"])
    path = hub / "rte" / "train-00000-of-00001.parquet"
    frame = pd.read_parquet(path)
    frame.loc[3, "label"] = 2
    frame.to_parquet(path)
    with pytest.raises(
        GlueDataError, match=r"train-\*.parquet row 3: bad rte row: label 2 outside"
    ):
        load_hf_task("rte", data_dir=hub, cache_dir=tmp_path / "cache")


def test_raw_dataset_wraps_the_error(rte_dir):
    _append(rte_dir / "RTE" / "test.tsv", "5\tA.")
    with pytest.raises(DatasetError, match=r"RTE/test.tsv:7: bad rte row: 2 columns, expected 3"):
        GlueRawDataset(task="rte", path=str(rte_dir)).load()


@pytest.fixture(scope="module")
def checkpoint():
    return tiny_checkpoint()


def test_checkpoint_vocab_and_hidden_size_mismatch(checkpoint):
    tok = tokenizer_from_checkpoint(checkpoint, "ckpt", lowercase=True)
    check_checkpoint(checkpoint, tok, "ckpt")
    vocab = checkpoint["config"]["vocab_size"]
    bad_vocab = {**checkpoint, "config": {**checkpoint["config"], "vocab_size": vocab + 7}}
    with pytest.raises(
        CheckpointMismatchError,
        match=rf"ckpt: embeddings.word_embeddings.weight has shape \({vocab}, 128\) but "
        rf"config.json says vocab_size={vocab + 7}, hidden_size=128",
    ):
        check_checkpoint(bad_vocab, tok, "ckpt")
    bad_hidden = {**checkpoint, "config": {**checkpoint["config"], "hidden_size": 64}}
    with pytest.raises(CheckpointMismatchError, match=r"hidden_size=64"):
        check_checkpoint(bad_hidden, tok, "ckpt")
    # a tokenizer larger than the embedding table cannot work (a smaller one can: padded vocab)
    other = tiny_checkpoint(texts=["completely different words here"] * 5)
    assert tok.get_vocab_size() > other["config"]["vocab_size"]
    with pytest.raises(
        CheckpointMismatchError,
        match=rf"other: the tokenizer has {tok.get_vocab_size()} tokens but config.json "
        rf"vocab_size={other['config']['vocab_size']}",
    ):
        check_checkpoint(other, tok, "other")
    no_tok = {**checkpoint, "tokenizer_files": {}}
    with pytest.raises(CheckpointMismatchError, match="no tokenizer.json or vocab.txt"):
        tokenizer_from_checkpoint(no_tok, "ckpt", lowercase=True)
