"""The SWAG model against transformers': same logits and loss from the same weights, and one
short fine-tuning trial that draws the randomness of transformers' Trainer with the same seed."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from bert_pipeline.model import BertForMultipleChoice
from bert_pipeline.model.checkpoint import (
    model_to_checkpoint,
    tokenizer_from_checkpoint,
    with_new_head,
    write_checkpoint,
)
from bert_pipeline.swag import finetune as ft
from bert_pipeline.swag.config import SwagConfig
from bert_pipeline.swag.data import read_swag
from bert_pipeline.swag.features import SwagFeatures, encode_choices
from tests.glue.helpers import record_training_losses, tiny_checkpoint, trainer_losses
from tests.swag.helpers import swag_rows, write_swag_jsonl

transformers = pytest.importorskip("transformers")

SEED, EPOCHS, BATCH, LR, MAX_LEN = 7, 2, 4, 1e-3, 32


def _table(tmp_path, n: int, seed: int) -> pd.DataFrame:
    return read_swag(write_swag_jsonl(tmp_path / f"s{seed}.jsonl", swag_rows(n, seed)))


def _texts(frame: pd.DataFrame) -> list[str]:
    return [t for col in ("context", "start", "ending0", "ending1") for t in frame[col]]


def test_same_weights_give_transformers_logits_and_loss(tmp_path):
    frame = _table(tmp_path, 6, 0)
    checkpoint = tiny_checkpoint(_texts(frame))
    ours = with_new_head(checkpoint, BertForMultipleChoice, None, "tiny", SEED).eval()
    folder = write_checkpoint(model_to_checkpoint(ours), tmp_path / "mc")
    hf = transformers.BertForMultipleChoice.from_pretrained(folder).eval()
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    features = SwagFeatures(encode_choices(tokenizer, frame, MAX_LEN), frame["label"].tolist())
    batch = features.collate([features[i] for i in range(len(features))])
    assert batch["input_ids"].shape[:2] == (6, 4) and batch["attention_mask"].min() == 0
    loss, logits = ours(**batch)
    reference = hf(**batch)
    torch.testing.assert_close(logits, reference.logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loss, reference.loss, rtol=1e-5, atol=1e-5)


def test_a_pair_is_the_context_then_the_start_and_ending(tmp_path):
    frame = _table(tmp_path, 1, 0)
    tokenizer = tokenizer_from_checkpoint(tiny_checkpoint(_texts(frame)), "tiny", True)
    (choices,) = encode_choices(tokenizer, frame, 64)
    row = frame.iloc[0]
    for k, choice in enumerate(choices):
        expected = tokenizer.encode(row["context"], f"{row['start']} {row[f'ending{k}']}")
        assert choice["input_ids"] == expected.ids
        assert choice["token_type_ids"] == expected.type_ids


def _ours(train, dev, checkpoint, monkeypatch) -> list[float]:
    losses = record_training_losses(monkeypatch, ft.SwagModule)
    config = SwagConfig(
        learning_rates=[LR],
        seeds=[SEED],
        epochs=EPOCHS,
        batch_size=BATCH,
        max_seq_length=MAX_LEN,
        progress_bar=False,
    )
    ft.finetune_swag(train, dev, dev.head(0), checkpoint, config)
    return losses


def _hf(train, dev, checkpoint, folder) -> list[float]:
    pytest.importorskip("accelerate")
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)

    def features(frame):
        return SwagFeatures(encode_choices(tokenizer, frame, MAX_LEN), frame["label"].tolist())

    transformers.set_seed(SEED)
    model = transformers.BertForMultipleChoice.from_pretrained(folder)
    return trainer_losses(
        model, features(train), features(dev), seed=SEED, epochs=EPOCHS, batch=BATCH, lr=LR
    )


def test_same_seed_gives_the_trainer_run(tmp_path, monkeypatch):
    train, dev = _table(tmp_path, 18, 1), _table(tmp_path, 6, 2)
    checkpoint = tiny_checkpoint(_texts(train) + _texts(dev))
    write_checkpoint(checkpoint, tmp_path / "tiny")
    ours = _ours(train, dev, checkpoint, monkeypatch)
    hf = _hf(train, dev, checkpoint, tmp_path / "tiny")
    assert len(ours) == len(hf) == 10
    torch.testing.assert_close(torch.tensor(ours), torch.tensor(hf), rtol=1e-5, atol=1e-6)
    assert len(set(ours)) > 1


def test_a_left_to_right_encoder_scores_choices_by_their_last_token(tmp_path):
    train, dev = _table(tmp_path, 8, 1), _table(tmp_path, 4, 2)
    checkpoint = tiny_checkpoint(_texts(train) + _texts(dev), is_decoder=True)
    config = SwagConfig(
        learning_rates=[LR],
        seeds=[SEED],
        epochs=1,
        batch_size=BATCH,
        max_seq_length=MAX_LEN,
        classifier_pooling="last",
        progress_bar=False,
    )
    result = ft.finetune_swag(train, dev, dev.head(0), checkpoint, config)
    saved = result.checkpoint["config"]
    assert saved["is_decoder"] is True and saved["classifier_pooling"] == "last"
    assert len(result.dev_probabilities) == 4
