"""Checkpoints belong to a run, and damaged checkpoint files are named with their parameter."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import Callback

from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.model.checkpoint import save_pretrained
from bert_pipeline.training.config import TrainingConfigError
from bert_pipeline.training.trainer import run_training
from tests.training.test_training import tiny_config


class _WeightsAtStart(Callback):
    def on_train_start(self, trainer, pl_module):
        self.state = {k: v.clone() for k, v in pl_module.model.state_dict().items()}


def test_resume_continues_the_latest_run_never_an_older_one(
    tmp_path, tiny_tokenizer, tiny_examples
):
    run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, seed=1))  # run A
    run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, seed=2))  # run B
    folder = tmp_path / "ckpt"
    last_b = torch.load(folder / "last.ckpt", weights_only=True)
    assert sorted(p.name for p in folder.glob("*.ckpt")) == ["last.ckpt", "step-6.ckpt"]
    (archived,) = (folder / "archive").iterdir()  # run A's checkpoints, out of resume's way
    assert {p.name for p in archived.iterdir()} == {"last.ckpt", "step-6.ckpt"}

    start = _WeightsAtStart()
    cfg = tiny_config(tmp_path, seed=2, resume=True, max_steps=9)
    resumed = run_training(tiny_examples, tiny_tokenizer, cfg, extra_callbacks=[start])
    assert resumed.metrics["global_step"] == 9
    for name, value in start.state.items():
        assert torch.equal(value, last_b["state_dict"][f"model.{name}"]), name


def test_damaged_checkpoint_files_are_named_with_their_parameter(
    tmp_path, tiny_tokenizer, tiny_examples
):
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"PK\x03\x04 not a checkpoint")
    with pytest.raises(TrainingConfigError, match=rf"pretrain_model.resume: {bad} is not a read"):
        run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, resume=str(bad)))

    config = BertConfig.from_preset("tiny", vocab_size=200, max_position_embeddings=64)
    folder = save_pretrained(BertForPreTraining(config), tmp_path / "init")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    cfg = tiny_config(tmp_path, init_from=str(folder), model_overrides={})
    with pytest.raises(TrainingConfigError, match=r"init_from: .*model.safetensors is not a read"):
        run_training(tiny_examples, tiny_tokenizer, cfg)
