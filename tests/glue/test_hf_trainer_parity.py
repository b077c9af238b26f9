"""Same seed, same run: our fine-tuning trial and transformers' Trainer draw the same randomness.

The new head's init, the per-epoch shuffle and the dropout masks all come from the trial seed
the way Trainer (with accelerate's seedable sampler) draws them, so from one checkpoint the two
loops produce the same per-step training losses with dropout on, across epochs and dev passes.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from bert_pipeline.glue import finetune as ft
from bert_pipeline.glue.features import GlueFeatures, encode_table
from bert_pipeline.glue.module import GlueModule
from bert_pipeline.glue.tasks import get_task
from bert_pipeline.model.checkpoint import write_checkpoint
from tests.glue.helpers import (
    examples,
    record_training_losses,
    tiny_checkpoint,
    trainer_losses,
)

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

SEED, EPOCHS, BATCH, LR, MAX_LEN = 7, 2, 8, 1e-3, 32


def _features(tokenizer, frame: pd.DataFrame, regression: bool) -> GlueFeatures:
    return GlueFeatures(encode_table(tokenizer, frame, MAX_LEN), frame["label"], regression)


def _ours(task, train, dev, checkpoint, monkeypatch) -> list[float]:
    losses = record_training_losses(monkeypatch, GlueModule)
    config = ft.GlueConfig(
        learning_rates=[LR],
        seeds=[SEED],
        epochs=EPOCHS,
        batch_size=BATCH,
        max_seq_length=MAX_LEN,
        progress_bar=False,
    )
    ft.finetune_task(task, train, dev, dev.head(0), checkpoint, config)
    return losses


def _hf(task, train, dev, checkpoint, folder) -> list[float]:
    tokenizer = ft.tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    transformers.set_seed(SEED)
    model = transformers.BertForSequenceClassification.from_pretrained(
        folder, num_labels=task.num_labels
    )
    return trainer_losses(
        model,
        _features(tokenizer, train, task.is_regression),
        _features(tokenizer, dev, task.is_regression),
        seed=SEED,
        epochs=EPOCHS,
        batch=BATCH,
        lr=LR,
    )


@pytest.mark.parametrize("task_name", ["mrpc", "stsb"])
def test_same_seed_gives_the_trainer_run(task_name, tmp_path, monkeypatch):
    task = get_task(task_name)
    train = examples(task, "train", 36)
    dev = examples(task, "dev", 10).assign(split="dev")
    checkpoint = tiny_checkpoint()
    write_checkpoint(checkpoint, tmp_path / "tiny")
    ours = _ours(task, train, dev, checkpoint, monkeypatch)
    hf = _hf(task, train, dev, checkpoint, tmp_path / "tiny")
    assert len(ours) == len(hf) == 10
    torch.testing.assert_close(torch.tensor(ours), torch.tensor(hf), rtol=1e-5, atol=1e-6)
    assert len(set(ours)) > 1
