"""One pretraining run with Lightning: data module, model, loggers, checkpoints, export.

`run_training` reads as the run's steps: the examples table, the model config, the data module,
the LightningModule (`training/module.py`: the forward, the losses and the metrics of a step),
the Trainer, `fit` (lock, resume or archive), the final metrics and the export. Every rank
runs it, whether called in-process by the Kedro node (one device) or by the distributed entry
point `bert_pipeline.training.launch` (torchrun / SLURM).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pandas as pd
import pyarrow as pa
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from tokenizers import Tokenizer

from bert_pipeline.data.examples import vocab_from_tokenizer
from bert_pipeline.data.shards import ExampleShards
from bert_pipeline.data.tokenizer import CLS, MASK, PAD, SEP, special_token_ids
from bert_pipeline.fsutil import remove_killed_writes
from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.model.checkpoint import load_pretrained, unreadable
from bert_pipeline.model.config import dropout_fields
from bert_pipeline.params import ConfigError
from bert_pipeline.runlock import RunLock
from bert_pipeline.training.callbacks import (
    GradNorm,
    HistoryLogger,
    LearningRate,
    TimeBudget,
    TokenThroughput,
)
from bert_pipeline.training.config import TrainingConfig
from bert_pipeline.training.core import build_trainer, mlflow_logger, sigterm_fails
from bert_pipeline.training.data import ExampleTable, PretrainingDataModule
from bert_pipeline.training.hardware import AUTO, choose
from bert_pipeline.training.module import BertPretrainingModule

logger = logging.getLogger(__name__)

LAST_CHECKPOINT = "last.ckpt"


@dataclass
class TrainingResult:
    """What a run produced. `model` and `history` are only filled on global rank 0."""

    model: BertForPreTraining | None
    history: pd.DataFrame | None
    metrics: dict[str, Any] = field(default_factory=dict)
    is_global_zero: bool = True


def build_model_config(cfg: TrainingConfig, tokenizer: Tokenizer, max_length: int) -> BertConfig:
    """The preset + overrides, with the vocabulary size taken from the tokenizer.

    With `model.init_from` the architecture is the checkpoint's (overrides such as dropout apply).
    """
    model = cfg.model
    try:
        if model.init_from:
            config = BertConfig.from_dict(
                {**read_checkpoint_config(model.init_from), **model.overrides}
            )
        else:
            config = BertConfig.from_preset(
                model.preset, **{"vocab_size": tokenizer.get_vocab_size(), **model.overrides}
            )
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(
            f"parameter pretrain_model.model (preset={model.preset!r}, overrides="
            f"{model.overrides}) does not give a valid BertConfig: {err}"
        ) from err
    where = (
        f"pretrain_model.model.init_from={model.init_from!r}"
        if model.init_from
        else "pretrain_model.model.overrides"
    )
    if config.is_decoder and cfg.objective != "ltr":
        raise ConfigError(
            f"{where} makes a left-to-right model (is_decoder) but pretrain_model.objective="
            f"{cfg.objective!r}: train it with objective ltr"
        )
    if config.head_lstm_size is not None:
        raise ConfigError(
            f"{where} sets head_lstm_size, a fine-tuning head (the task's head_lstm_size "
            "parameter), not part of a pretrained model"
        )
    if cfg.objective == "ltr":  # the causal mask is part of the architecture, for fine-tuning too
        config = dataclasses.replace(config, is_decoder=True)
    if config.vocab_size < tokenizer.get_vocab_size():
        where = (
            f"the checkpoint pretrain_model.model.init_from={model.init_from!r} (pair it with its "
            "own vocab.txt: pretrain_data.tokenizer.vocab_file)"
            if model.init_from
            else "pretrain_model.model.overrides.vocab_size"
        )
        raise ConfigError(
            f"vocab_size={config.vocab_size} of {where} is smaller than the tokenizer's "
            f"vocabulary ({tokenizer.get_vocab_size()})"
        )
    if max_length > config.max_position_embeddings:
        raise ConfigError(
            f"examples are up to {max_length} tokens but the model has max_position_embeddings="
            f"{config.max_position_embeddings}; raise it in pretrain_model.model.overrides or "
            "shorten pretrain_data's max_seq_length"
        )
    return config


def read_checkpoint_config(directory: str) -> dict[str, Any]:
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise ConfigError(
            f"parameter pretrain_model.model.init_from={directory!r}: no config.json in that folder"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def init_weights(model: BertForPreTraining, directory: str) -> None:
    """Starts from an imported checkpoint (ours or HF's); heads it lacks stay fresh."""
    try:
        pretrained, info = load_pretrained(directory, BertForPreTraining, output_loading_info=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"parameter pretrain_model.model.init_from: {exc}") from None
    model.load_state_dict(pretrained.state_dict())
    logger.info(
        "initialised from %s (fresh: %s; ignored: %s)",
        directory,
        info.missing_keys or "none",
        info.unexpected_keys or "none",
    )


def resolve_resume(cfg: TrainingConfig) -> str | None:
    """`resume`: false: fresh run; true: checkpoint_dir/last.ckpt; a path: that file.

    A resume never starts over unasked: a missing, dangling or unreadable checkpoint is refused
    in one line (the run guard calls this before the first node). checkpoint_dir only ever holds
    the latest run's checkpoints (see `archive_checkpoints`), so last.ckpt is that run's. The
    file is checked as a plain-tensor checkpoint (never unpickled).
    """
    if cfg.resume is False or cfg.resume is None:
        return None
    if cfg.resume is True:
        path = Path(cfg.checkpoint_dir) / LAST_CHECKPOINT
        if not path.exists():
            raise ConfigError(
                f"parameter pretrain_model.resume=true: {missing_checkpoint(path)}, so there is "
                "no run to continue; set pretrain_model.resume=false to start over, or "
                "resume=<a .ckpt file>"
            )
    else:
        path = Path(str(cfg.resume))
        if not path.is_file():
            raise ConfigError(
                f"parameter pretrain_model.resume={cfg.resume!r}: no such checkpoint file"
            )
    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # torch raises many types for a damaged file
        message = unreadable(path, exc, "checkpoint")
        raise ConfigError(f"parameter pretrain_model.resume: {message}") from None
    return str(path)


def missing_checkpoint(path: Path) -> str:
    """Why `path` cannot be read: absent, or a link (Lightning's last.ckpt) to a deleted file."""
    if path.is_symlink():
        return f"{path} points to {os.readlink(path)}, which does not exist"
    return f"{path} does not exist"


def archive_checkpoints(checkpoint_dir: str | Path) -> None:
    """A fresh run moves an earlier run's checkpoints to `archive/<time>/`: `resume=true` must
    never find another run's last.ckpt, nor Lightning write `last-v1.ckpt` beside it."""
    folder = Path(checkpoint_dir)
    old = sorted(p for p in folder.glob("*.ckpt")) if folder.is_dir() else []
    if not old:
        return
    target = folder / "archive" / time.strftime("%Y%m%d-%H%M%S")
    target.mkdir(parents=True, exist_ok=True)
    for path in old:
        os.replace(path, target / path.name)
    logger.info("fresh run: the previous run's checkpoints moved to %s", target)


def parameters_digest(model: torch.nn.Module) -> str:
    """sha256 over every parameter's bytes, to check that data-parallel replicas agree."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def example_table(examples: pd.DataFrame | pa.Table | ExampleShards) -> ExampleTable:
    if isinstance(examples, ExampleShards):
        return ExampleTable(examples.table(), release_pages=examples.release_pages)
    return ExampleTable(examples)


def build_datamodule(
    table: ExampleTable, tokenizer: Tokenizer, cfg: TrainingConfig
) -> PretrainingDataModule:
    ids = special_token_ids(tokenizer)
    return PretrainingDataModule(
        table,
        pad_token_id=ids[PAD],
        mask_token_id=ids[MASK],
        vocab_size=tokenizer.get_vocab_size(),
        # [UNK] stays maskable, as in google's script and the static examples
        special_token_ids=[ids[t] for t in (PAD, CLS, SEP, MASK)],
        batch_size=cfg.batch_size,
        val_split=cfg.val_split,
        seed=cfg.seed,
        masking=cfg.masking,
        masked_lm_prob=cfg.masked_lm_prob,
        max_predictions_per_seq=cfg.max_predictions_per_seq,
        pad_to_multiple_of=cfg.pad_to_multiple_of,
        num_workers=cfg.num_workers,
        next_token=cfg.objective == "ltr",
        length_buckets=cfg.length_buckets,
        # static examples were masked by word when they were made
        continuation=vocab_from_tokenizer(tokenizer).continuation if cfg.whole_word_mask else None,
    )


def with_machine_choice(cfg: TrainingConfig) -> TrainingConfig:
    """`cfg` with `precision: auto` and `compile: auto` decided for this machine, in one line of
    the log (every rank of a node decides the same)."""
    if AUTO not in (cfg.precision, cfg.compile):
        return cfg
    choice = choose(cfg.precision, cfg.compile, cfg.accelerator)
    if rank_zero_only.rank == 0:
        logger.info("precision %s, compile %s: %s", choice.precision, choice.compile, choice.reason)
    return dataclasses.replace(cfg, precision=choice.precision, compile=choice.compile)


def build_module(
    cfg: TrainingConfig, model_config: BertConfig, datamodule: PretrainingDataModule
) -> BertPretrainingModule:
    """The LightningModule: the training dropout, `init_from` weights, compiled if asked; the
    masked-LM loss's constant divisor from `datamodule` when `mlm_loss_average` is "dataset"."""
    train_config = dataclasses.replace(model_config, **dropout_fields(cfg.dropout))
    module = BertPretrainingModule(
        train_config.to_dict(),
        optimizer=dataclasses.asdict(cfg.optimizer),
        warmup_steps=cfg.schedule.warmup_steps,
        max_steps=cfg.schedule.max_steps,
        next_sentence=cfg.next_sentence,
        nsp_loss_weight=cfg.nsp_loss_weight,
        objective=cfg.objective,
        mlm_tokens_per_step=(
            datamodule.masked_tokens_per_step() if cfg.mlm_loss_average == "dataset" else None
        ),
    )
    if cfg.model.init_from:
        init_weights(module.model, cfg.model.init_from)
    if cfg.compile:  # in place: parameter names, checkpoints and the export are unchanged
        # Length buckets fix the shapes: one static graph per bucket, not a dynamic one.
        module.model.compile(dynamic=False if cfg.length_buckets else None)
    return module


def build_pretraining_trainer(
    cfg: TrainingConfig, loggers: list[Any], callbacks: list[pl.Callback]
) -> pl.Trainer:
    """The shared Trainer with the step-based loop and periodic checkpoints of `cfg`."""
    checkpoints = ModelCheckpoint(
        dirpath=cfg.checkpoint_dir,
        filename="step-{step}",
        every_n_train_steps=cfg.checkpoint_every_n_steps,
        save_top_k=-1 if cfg.keep_checkpoints else 1,
        save_last="link",
        auto_insert_metric_name=False,
    )
    budget = cfg.schedule.budget_minutes
    if budget is not None:
        callbacks = [*callbacks, TimeBudget(budget)]
    return build_trainer(
        cfg,
        loggers=loggers,
        callbacks=[checkpoints, *callbacks],
        refresh_rate=max(1, cfg.log_every_n_steps // 2),
        max_steps=cfg.schedule.max_steps,
        max_epochs=-1,
        accumulate_grad_batches=cfg.accumulate_grad_batches,
        val_check_interval=cfg.val_every_n_steps * cfg.accumulate_grad_batches,
        check_val_every_n_epoch=None,
        log_every_n_steps=cfg.log_every_n_steps,
        use_distributed_sampler=False,  # the batch sampler shards by rank itself (and resumes)
        default_root_dir=cfg.checkpoint_dir,
    )


def fit(
    trainer: pl.Trainer,
    module: BertPretrainingModule,
    datamodule: PretrainingDataModule,
    cfg: TrainingConfig,
) -> None:
    """Trains under the checkpoint folder's lock, resuming or archiving the earlier run's files."""
    with contextlib.ExitStack() as stack:
        if trainer.is_global_zero:  # the rank that writes checkpoints owns the folder
            stack.enter_context(RunLock(cfg.checkpoint_dir, "checkpoint_dir"))
            # checkpoints are written under a temporary name (core.SiblingCheckpointIO)
            remove_killed_writes(cfg.checkpoint_dir, "*.ckpt")
        ckpt_path = resolve_resume(cfg)
        if ckpt_path is not None:
            logger.info("resuming from %s", ckpt_path)
        elif trainer.is_global_zero:
            archive_checkpoints(cfg.checkpoint_dir)
        with sigterm_fails(trainer, lambda: what_a_stop_left(cfg)):
            trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)


def what_a_stop_left(cfg: TrainingConfig) -> str:
    """The checkpoint a stopped run continues from: a fresh run archived any earlier one's."""
    last = Path(cfg.checkpoint_dir) / "last.ckpt"
    if not last.exists():
        every = cfg.checkpoint_every_n_steps
        return f"nothing was exported, and no checkpoint written yet (one every {every:,} steps)"
    return f"nothing was exported; pretrain_model.resume=true continues from {last}"


def final_metrics(
    trainer: pl.Trainer,
    module: BertPretrainingModule,
    datamodule: PretrainingDataModule,
    cfg: TrainingConfig,
    throughput: TokenThroughput,
) -> dict[str, Any]:
    """Validation metrics of the final weights (validated again if the last step was not),
    the run's facts and, under DDP, every replica's parameter digest."""
    final = {k: v for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
    if not final or trainer.global_step % cfg.val_every_n_steps:  # last step not validated yet
        with sigterm_fails(trainer, lambda: what_a_stop_left(cfg)):
            final = trainer.validate(module, datamodule=datamodule, verbose=False)[0]
    metrics: dict[str, Any] = {k: float(v) for k, v in final.items() if k.startswith("val/")}
    metrics["global_step"] = int(trainer.global_step)
    metrics["world_size"] = int(trainer.world_size)
    metrics["dynamic_masking"] = bool(datamodule.dynamic_masking)
    metrics["num_train_examples"] = int(len(datamodule.train_indices))
    metrics["num_val_examples"] = int(len(datamodule.val_indices))
    if throughput.total_seconds:
        metrics["train/mean_tokens_per_sec"] = throughput.mean_tokens_per_sec
    if isinstance(trainer.strategy, DDPStrategy):  # replicas must be identical after training
        metrics["rank_parameter_digests"] = replica_digests(trainer, module.model)
    return metrics


def replica_digests(trainer: pl.Trainer, model: torch.nn.Module) -> list[str]:
    """Every rank's `parameters_digest`, gathered (a collective: every rank calls it)."""
    local = parameters_digest(model)
    if trainer.world_size == 1:
        return [local]
    digests: list[Any] = [None] * trainer.world_size
    torch.distributed.all_gather_object(digests, local)
    return digests


def export_model(trainer: pl.Trainer, model_config: BertConfig) -> BertForPreTraining | None:
    """The trained model in eval mode on global rank 0, None elsewhere. Full (unsharded)
    weights are a collective for FSDP, so every rank takes part."""
    state = trainer.strategy.lightning_module_state_dict()
    if not trainer.is_global_zero:
        return None
    model = BertForPreTraining(model_config)
    prefix = "model."
    model.load_state_dict({k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)})
    return model.eval()


def run_training(
    examples: pd.DataFrame | pa.Table | ExampleShards,
    tokenizer: Tokenizer,
    cfg: TrainingConfig,
    *,
    mlflow_run_id: str | None = None,
    mlflow_tracking_uri: str | None = None,
    extra_callbacks: list[pl.Callback] | None = None,
) -> TrainingResult:
    """Trains BERT from scratch (or resumes) on `examples`; every rank calls this."""
    cfg = with_machine_choice(cfg)
    pl.seed_everything(cfg.seed, workers=True)
    table = example_table(examples)
    model_config = build_model_config(cfg, tokenizer, int(table.lengths().max()))
    datamodule = build_datamodule(table, tokenizer, cfg)
    module = build_module(cfg, model_config, datamodule)

    history, mlflow = HistoryLogger(), mlflow_logger(mlflow_run_id, mlflow_tracking_uri)
    throughput = TokenThroughput(cfg.log_every_n_steps)
    callbacks = [throughput, LearningRate(), GradNorm(), *(extra_callbacks or [])]
    trainer = build_pretraining_trainer(cfg, [history, *mlflow], callbacks)
    fit(trainer, module, datamodule, cfg)

    metrics = final_metrics(trainer, module, datamodule, cfg, throughput)
    model = export_model(trainer, model_config)
    if model is None:
        return TrainingResult(None, None, metrics, is_global_zero=False)
    return TrainingResult(model, history.to_frame(), metrics, is_global_zero=True)
