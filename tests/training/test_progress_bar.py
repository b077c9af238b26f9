"""The training progress bar: a step-bounded run counts steps over the whole run."""

from __future__ import annotations

import time

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from bert_pipeline.training.callbacks import ProgressBar, TimeBudget
from bert_pipeline.training.config import DeviceParams
from bert_pipeline.training.core import build_trainer


class _Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(devices: DeviceParams, **loop) -> pl.Trainer:
    trainer = build_trainer(devices, **loop)
    trainer.fit(_Tiny(), DataLoader(torch.randn(6, 2), batch_size=2))  # 3 batches an epoch
    return trainer


def test_step_bounded_bar_counts_global_steps_of_max_steps(capsys):
    trainer = _fit(DeviceParams(accelerator="cpu"), max_steps=7, max_epochs=-1)
    bar = next(c for c in trainer.callbacks if isinstance(c, ProgressBar)).train_progress_bar
    assert (bar.n, bar.total) == (7, 7)  # across three epochs, not the batches of the last
    output = capsys.readouterr().out
    assert "step 7/7" in output
    assert "Epoch" not in output


def test_epoch_bounded_bar_keeps_lightnings_epochs(capsys):
    _fit(DeviceParams(accelerator="cpu"), max_epochs=2)
    assert "Epoch 1: 100%" in capsys.readouterr().out


def test_progress_bar_false_prints_no_bar(capsys):
    trainer = _fit(DeviceParams(accelerator="cpu", progress_bar=False), max_steps=4, max_epochs=-1)
    assert not [c for c in trainer.callbacks if isinstance(c, ProgressBar)]
    output = capsys.readouterr().out
    assert "step" not in output and "Epoch" not in output


def test_under_a_time_budget_the_bar_ends_where_the_time_runs_out(capsys):
    """A 3-second budget and a slowed step: the total is the step the time allows, not
    max_steps, and the run stops there."""

    class _Slow(_Tiny):
        def training_step(self, batch, batch_idx):
            time.sleep(0.1)
            return super().training_step(batch, batch_idx)

    budget = TimeBudget(minutes=0.05)
    trainer = build_trainer(
        DeviceParams(accelerator="cpu"), max_steps=10_000, max_epochs=-1, callbacks=[budget]
    )
    trainer.fit(_Slow(), DataLoader(torch.randn(6, 2), batch_size=2))
    bar = next(c for c in trainer.callbacks if isinstance(c, ProgressBar)).train_progress_bar
    assert 10 <= trainer.global_step < 40
    assert abs(bar.total - trainer.global_step) <= 3  # the estimate, updated as it ran
    assert f"step {bar.n}/{bar.total} " in capsys.readouterr().out
