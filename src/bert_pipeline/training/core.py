"""What every training run shares, pretraining and each fine-tuning task alike.

One AdamW with one parameter-group rule, one warmup + linear decay schedule, one Trainer
builder (devices, precision, clipping, determinism, progress bar) and the Lightning logger into
the MLflow run kedro-mlflow opened, or into a task's child run (`bert_pipeline.tracking`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch import nn

from bert_pipeline.fsutil import atomic_file
from bert_pipeline.training.callbacks import PipelineMLFlowLogger, ProgressBar, TimeBudget
from bert_pipeline.training.config import DeviceParams, OptimizerParams
from bert_pipeline.training.hardware import AUTO, choose, keep_freed_memory, warn_emulated_bf16

logger = logging.getLogger(__name__)


def print_lightning_records_once() -> None:
    """`import lightning` gives its package logger a stderr handler of its own ("INFO: ...")
    even where the application configured logging; there (a root handler, as conf/logging.yml
    makes in a `kedro run`) every Lightning record, which also propagates to the root, would
    print twice. lightning.pytorch follows the same rule for the handler it adds."""
    package = logging.getLogger("lightning")
    if package.propagate and logging.getLogger().hasHandlers():
        for handler in list(package.handlers):
            package.removeHandler(handler)


# Every training path (pretraining, each fine-tuning task) imports this module before it logs.
print_lightning_records_once()


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: decay on weight matrices/embeddings, none on LayerNorm parameters or biases."""
    no_decay_ids = set()
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            no_decay_ids.update(id(p) for p in module.parameters(recurse=False))
    decay, no_decay = [], []
    for name, param in model.named_parameters():  # shared (tied) weights appear once
        if not param.requires_grad:
            continue
        # Linear's `bias`, an LSTM's `bias_ih_l0` / `bias_hh_l0`
        if name.rpartition(".")[2].startswith("bias") or id(param) in no_decay_ids:
            no_decay.append(param)
        else:
            decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def warmup_steps_of(warmup_proportion: float, total_steps: int) -> int:
    """The warmup share in whole steps, floored as google's `int(num_train_steps *
    warmup_proportion)` (transformers' `warmup_ratio` rounds up)."""
    return int(warmup_proportion * total_steps)


def linear_warmup_decay(warmup_steps: int, total_steps: int) -> Callable[[float], float]:
    """LR multiplier: step / warmup (0 at step 0) up to 1, then linearly to 0 at `total_steps`.

    google's BERT and transformers' `get_linear_schedule_with_warmup` use the same formula.
    """

    def factor(step: float) -> float:
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def budget_warmup_decay(
    warmup_steps: int, total_steps: int, budget: TimeBudget
) -> Callable[[int], float]:
    """`linear_warmup_decay` at the run's progress: the larger of the steps done and the share
    of the time budget used, in steps (Cramming's budget-based schedule), so the rate reaches 0
    when the time runs out, whatever the machine's speed."""
    by_steps = linear_warmup_decay(warmup_steps, total_steps)

    def factor(step: int) -> float:
        return by_steps(max(step, budget.used() * total_steps))

    return factor


def configure_adamw(
    module: pl.LightningModule,
    model: nn.Module,
    optimizer: OptimizerParams,
    warmup_steps: int,
    total_steps: int,
) -> dict[str, Any]:
    """`configure_optimizers`' answer: AdamW over `model` with the stepped schedule, or the
    budget-based one when the Trainer has a `TimeBudget`."""
    trainer = module._trainer
    mixed = trainer is not None and str(trainer.precision).endswith("-mixed")
    adamw = torch.optim.AdamW(
        parameter_groups(model, optimizer.weight_decay),
        lr=optimizer.lr,
        betas=tuple(optimizer.betas),
        eps=optimizer.eps,
        # One fused kernel per step (~6x faster on CPU); Lightning's mixed-precision plugins
        # refuse gradient clipping with an optimizer that unscales gradients itself.
        fused=not mixed,
    )
    callbacks = trainer.callbacks if trainer is not None else []
    budget = next((c for c in callbacks if isinstance(c, TimeBudget)), None)
    if budget is None:
        factor = linear_warmup_decay(warmup_steps, total_steps)
    else:
        factor = budget_warmup_decay(warmup_steps, total_steps, budget)
    schedule = torch.optim.lr_scheduler.LambdaLR(adamw, factor)
    return {
        "optimizer": adamw,
        "lr_scheduler": {"scheduler": schedule, "interval": "step", "frequency": 1},
    }


def build_trainer(
    devices: DeviceParams,
    *,
    loggers: list[Any] | None = None,
    callbacks: list[pl.Callback] | None = None,
    refresh_rate: int = 1,
    **loop: Any,
) -> pl.Trainer:
    """A Trainer with the project's device, precision, clipping and logging conventions.

    `loop` holds the run's own loop settings (max_steps or max_epochs, validation cadence...).
    """
    keep_freed_memory(devices.accelerator)
    precision = devices.precision
    if precision == AUTO:
        choice = choose(precision, False, devices.accelerator)
        precision = choice.precision
        logger.info("precision auto: %s", choice.reason)
    else:
        warn_emulated_bf16(precision, devices.accelerator)
    callbacks = [*(callbacks or []), PredictionStopsOnSigterm()]
    checkpointing = any(isinstance(c, ModelCheckpoint) for c in callbacks)
    if devices.progress_bar:
        callbacks.append(ProgressBar(refresh_rate=refresh_rate))
    strategy: Any = devices.strategy
    if strategy == "ddp" and devices.accelerator == "cpu":
        strategy = DDPStrategy(process_group_backend="gloo")
    return pl.Trainer(
        accelerator=devices.accelerator,
        devices=devices.devices,
        num_nodes=devices.num_nodes,
        strategy=strategy,
        precision=precision,
        gradient_clip_val=devices.gradient_clip_val or None,
        gradient_clip_algorithm="norm",
        deterministic=devices.deterministic,
        logger=loggers or False,
        callbacks=callbacks,
        enable_checkpointing=checkpointing,
        plugins=[SiblingCheckpointIO()] if checkpointing else None,
        enable_progress_bar=devices.progress_bar,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        **loop,
    )


class StoppedBySignal(RuntimeError):
    """A run that SIGTERM (`kill`, a scheduler's preemption) ended before its last step."""


class PredictionStopsOnSigterm(pl.Callback):
    """Lightning's `fit` and `validate` stop on SIGTERM, its `predict` only notes it and runs
    to the end: a kill during a task's test predictions would not stop the run."""

    def on_predict_batch_end(self, trainer: pl.Trainer, *args: Any, **kwargs: Any) -> None:
        if trainer.received_sigterm:
            raise SIGTERMException


@contextlib.contextmanager
def sigterm_fails(trainer: pl.Trainer, after: Callable[[], str]) -> Iterator[None]:
    """Makes SIGTERM a failure of the Trainer calls inside. Lightning ends `fit` and `validate`
    (and `predict`, through PredictionStopsOnSigterm) on SIGTERM with SystemExit(None), so
    `kedro run` would exit 0 without its outputs, as if it had finished. `after()` says what the
    stop left behind."""
    try:
        yield
    except SIGTERMException:
        if trainer.state.fn == TrainerFn.PREDICTING:
            stopped = "prediction stopped by SIGTERM"
        else:
            stopped = f"training stopped by SIGTERM at step {trainer.global_step:,}"
        raise StoppedBySignal(f"{stopped}: {after()}") from None


def predict_batches(
    trainer: pl.Trainer, model: pl.LightningModule, after: str, **data: Any
) -> torch.Tensor:
    """`trainer.predict`'s outputs concatenated; a SIGTERM fails it (`sigterm_fails`)."""
    with sigterm_fails(trainer, lambda: after):
        return torch.cat(trainer.predict(model, **data))


class SiblingCheckpointIO(TorchCheckpointIO):
    """Writes a checkpoint to a hidden file in its own folder, then renames it into place.

    Lightning's writer stages the file in $TMPDIR and moves it: across filesystems that is a copy,
    and a full disk leaves a torn `step-N.ckpt` beside the good ones. A rename in one folder is
    atomic; the fsync puts the bytes on disk before the name points at them.
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None
    ) -> None:
        with atomic_file(path) as tmp, open(tmp, "wb") as file:
            try:
                torch.save(checkpoint, file)
            except RuntimeError as exc:  # torch's zip writer hides a failed write (disk full)
                if isinstance(exc.__context__, OSError):
                    raise exc.__context__ from None
                raise
            file.flush()
            os.fsync(file.fileno())


# ---------------------------------------------------------------------------- MLflow


def mlflow_logger(
    run_id: str | None,
    tracking_uri: str | None = None,
    *,
    prefix: str = "",
) -> list[PipelineMLFlowLogger]:
    """The Lightning logger writing into `run_id` (never ending it); [] when not tracked.

    Training reaches MLflow only through this logger; the rest is `bert_pipeline.tracking`'s."""
    if not run_id:
        return []
    from bert_pipeline import tracking  # only a tracked run needs mlflow

    uri = tracking_uri or tracking.tracking_uri()
    return [PipelineMLFlowLogger(run_id=run_id, tracking_uri=uri, prefix=prefix)]
