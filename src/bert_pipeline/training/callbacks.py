"""Throughput measurement and the two loggers of a run: MLflow (the pipeline's run) and history."""

from __future__ import annotations

import datetime
import time
from typing import Any

import lightning.pytorch as pl
import pandas as pd
import torch
from lightning.pytorch.callbacks import Timer, TQDMProgressBar
from lightning.pytorch.loggers import Logger, MLFlowLogger
from lightning.pytorch.utilities import grad_norm, rank_zero_only


class TokenThroughput(pl.Callback):
    """Logs real (non-padding) tokens per second over all ranks, every `log_every_n_steps` steps.

    The window covers data loading, forward, backward and optimizer time but not validation.
    """

    def __init__(self, log_every_n_steps: int) -> None:
        self.log_every_n_steps = log_every_n_steps
        self._tokens = 0
        self._start: float | None = None
        self._paused: float | None = None
        self._last_step = -1
        self.total_tokens = 0
        self.total_seconds = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._start is None:
            self._start = time.perf_counter()
        self._tokens += int(batch["attention_mask"].sum())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self._last_step or step % self.log_every_n_steps != 0:
            return  # mid-accumulation, or not a logging step
        self._last_step = step
        elapsed = time.perf_counter() - self._start
        tokens = torch.tensor(float(self._tokens), device=pl_module.device)
        tokens = float(trainer.strategy.reduce(tokens, reduce_op="sum"))
        self.total_tokens += int(tokens)
        self.total_seconds += elapsed
        pl_module.log("train/tokens_per_sec", tokens / max(elapsed, 1e-9), prog_bar=True)
        self._tokens, self._start = 0, None

    def on_validation_start(self, trainer, pl_module) -> None:
        # pause the window: validation time is not training throughput
        if self._start is not None:
            self._paused = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._start is not None and self._paused is not None:
            self._start += time.perf_counter() - self._paused
        self._paused = None

    @property
    def mean_tokens_per_sec(self) -> float:
        return self.total_tokens / self.total_seconds if self.total_seconds else float("nan")


class LearningRate(pl.Callback):
    """Logs the learning rate as `train/lr`, once: the optimizer's parameter groups (with and
    without weight decay) share one schedule, where Lightning's LearningRateMonitor draws
    one identical chart per group (`lr-AdamW/pg1`, `lr-AdamW/pg2`)."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        lr = trainer.optimizers[0].param_groups[0]["lr"]
        pl_module.log("train/lr", lr, on_step=True, on_epoch=False, batch_size=1)


class GradNorm(pl.Callback):
    """Logs the gradients' global L2 norm before clipping as `train/grad_norm`: how hard
    `gradient_clip_val` binds (benchmarks/bert_tiny_comparison.md). Computed only on the steps
    Lightning logs, so the other steps pay nothing for it."""

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if (trainer.global_step + 1) % trainer.log_every_n_steps:
            return
        norm = grad_norm(pl_module, norm_type=2).get("grad_2.0_norm_total")
        if norm is not None:
            pl_module.log("train/grad_norm", norm, on_step=True, on_epoch=False, batch_size=1)


class TimeBudget(Timer):
    """Lightning's Timer (it stops the run when the time is up, and its elapsed time is saved in
    checkpoints, so a resumed run continues the budget) with the share of it used so far."""

    def __init__(self, minutes: float) -> None:
        super().__init__(duration=datetime.timedelta(minutes=minutes), interval="step")
        self.seconds = minutes * 60

    def used(self) -> float:
        return self.time_elapsed("train") / self.seconds


class ProgressBar(TQDMProgressBar):
    """Lightning's bar without the logger version (an MLflow run id fragment, meaningless here).

    A run bounded by `max_steps` (pretraining) counts optimizer steps over the whole run,
    "step 1200/10000" with the run's ETA, where Lightning counts the batches of the current
    epoch; a resumed run starts at its step. Epoch-bounded runs keep Lightning's epoch bar.
    Under a `TimeBudget` the total is the step at which the time runs out at this run's pace
    so far (at most `max_steps`), so the ETA is the budget's.
    """

    STEP_BAR_FORMAT = (
        "step {n_fmt}/{total_fmt} {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"
    )
    _budget: TimeBudget | None = None
    _budget_start = 0.0  # the budget's seconds already used when this run started (resumed)

    def on_train_start(self, trainer, pl_module) -> None:
        super().on_train_start(trainer, pl_module)
        if trainer.max_steps > 0:
            bar = self.train_progress_bar
            bar.bar_format = self.STEP_BAR_FORMAT
            bar.reset(total=trainer.max_steps)
            bar.n = bar.initial = trainer.global_step  # ETA from the steps this run makes
        budgets = [c for c in trainer.callbacks if isinstance(c, TimeBudget)]
        self._budget = budgets[0] if budgets else None
        self._budget_start = self._budget.time_elapsed("train") if self._budget else 0.0

    def on_train_epoch_start(self, trainer, *args: Any) -> None:
        if trainer.max_steps <= 0:  # a step bar spans epochs: no reset at their start
            super().on_train_epoch_start(trainer, *args)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.max_steps <= 0:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            return
        bar, step = self.train_progress_bar, trainer.global_step
        if step != bar.n and self._should_update(step, bar.total):
            if self._budget is not None:
                bar.total = self._last_step(step, bar.initial, trainer.max_steps)
            bar.n = step
            bar.set_postfix(self.get_metrics(trainer, pl_module))

    def _last_step(self, step: int, first: int, max_steps: int) -> int:
        """Where the time budget ends at the pace of the steps since `first` (this run's)."""
        elapsed = self._budget.time_elapsed("train")
        spent = elapsed - self._budget_start
        if spent <= 0 or step <= first:
            return max_steps
        left = max(self._budget.seconds - elapsed, 0.0)
        return min(max_steps, step + round(left * (step - first) / spent))

    def get_metrics(self, trainer, pl_module) -> dict[str, Any]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        return metrics


class PipelineMLFlowLogger(MLFlowLogger):
    """MLFlowLogger that writes into an existing run (kedro-mlflow's) and never ends it.

    Lightning's `finalize` marks the run FINISHED, which would close kedro-mlflow's run before the
    pipeline's later nodes log their artifacts. Parameters are logged by the run's owner
    (kedro-mlflow, or `bert_pipeline.tracking.open_run` for the entry point), not from the
    module's hyperparameters.
    A `prefix` is joined with "/" (a fine-tuning trial's metrics: `lr_2e-05_seed_42/dev_f1`).
    """

    LOGGER_JOIN_CHAR = "/"

    @rank_zero_only
    def log_hyperparams(self, params: Any) -> None:
        return None

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Lightning's metrics without `epoch` (a flat chart of the epoch counter)."""
        super().log_metrics({k: v for k, v in metrics.items() if k != "epoch"}, step)

    @rank_zero_only
    def finalize(self, status: str = "success") -> None:
        """Keeps the run open; the owner of the run (kedro-mlflow or the entry point) ends it."""


class HistoryLogger(Logger):
    """Keeps every logged metric in memory as a long table (step, metric, value) for the report."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[int, str, float]] = []

    @property
    def name(self) -> str:
        return "history"

    @property
    def version(self) -> int:
        return 0

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        return None

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        for name, value in metrics.items():
            if name == "epoch":
                continue
            self.rows.append((int(step or 0), name, float(value)))

    def to_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=["step", "metric", "value"])
        return frame.astype({"step": "int64", "metric": "string", "value": "float64"})
