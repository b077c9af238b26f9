"""Fine-tunes one GLUE task over a learning-rate x seed grid and keeps the best run on dev.

As in the BERT paper: every (lr, seed) trial trains all weights for `epochs` epochs; the trial
and epoch with the best dev score win (score = the task's metrics averaged, MNLI m/mm
averaged). No Kedro here; MLflow is used only when a run id is given.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pandas as pd
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, DistributedSampler

from bert_pipeline.data.tokenizer import load_tokenizer
from bert_pipeline.glue.features import GlueFeatures, encode_table
from bert_pipeline.glue.module import GlueModule
from bert_pipeline.glue.tasks import GlueTask
from bert_pipeline.model import BertForSequenceClassification
from bert_pipeline.model.checkpoint import model_from_checkpoint, model_to_checkpoint

logger = logging.getLogger(__name__)

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


class CheckpointMismatchError(ValueError):
    """The checkpoint, its config.json and the tokenizer disagree."""


@dataclass
class FinetuneConfig:
    """Hyperparameters of one task (paper defaults: batch 32, 3 epochs, lr in {5,4,3,2}e-5)."""

    learning_rates: list[float] = field(default_factory=lambda: [2e-5])
    seeds: list[int] = field(default_factory=lambda: [42])
    batch_size: int = 32
    eval_batch_size: int = 128
    epochs: int = 3
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    max_seq_length: int = 128
    gradient_clip_val: float = 1.0
    lowercase: bool = True
    accelerator: str = "auto"
    precision: str = "32"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], where: str) -> FinetuneConfig:
        """Builds from a parameters dict; unknown or invalid keys name `where` (the yml path)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown} in {where}; known: {sorted(known)}")
        config = cls(**params)
        for name, cast in (("learning_rates", float), ("seeds", int)):
            values = getattr(config, name)
            if not isinstance(values, list | tuple) or not values:
                raise ValueError(f"{where}.{name} must be a non-empty list, got {values!r}")
            try:
                setattr(config, name, [cast(v) for v in values])
            except (TypeError, ValueError):
                raise ValueError(f"{where}.{name} must hold numbers, got {values!r}") from None
        for name in ("batch_size", "eval_batch_size", "epochs", "max_seq_length"):
            if int(getattr(config, name)) < 1:
                raise ValueError(f"{where}.{name} must be >= 1, got {getattr(config, name)}")
        if not 0 <= config.warmup_proportion < 1:
            raise ValueError(f"{where}.warmup_proportion must be in [0, 1)")
        return config


@dataclass
class FinetuneResult:
    checkpoint: dict
    dev_metrics: dict[str, dict[str, float]]
    best: dict[str, Any]
    trials: list[dict[str, Any]]
    dev_predictions: pd.DataFrame
    test_predictions: pd.DataFrame


def tokenizer_from_checkpoint(checkpoint: Mapping, source: str, lowercase: bool) -> Tokenizer:
    """The tokenizer stored in a checkpoint's folder (tokenizer.json, else vocab.txt)."""
    files = checkpoint.get("tokenizer_files") or {}
    if not files:
        raise CheckpointMismatchError(
            f"{source}: no tokenizer.json or vocab.txt beside the weights; export the model with "
            "its tokenizer files"
        )
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            (Path(tmp) / name).write_bytes(data)
        return load_tokenizer(tmp, lowercase=lowercase)


def check_checkpoint(checkpoint: Mapping, tokenizer: Tokenizer, source: str) -> None:
    """Fails early, naming the parameter, when weights, config.json and tokenizer disagree."""
    config = checkpoint["config"]
    for key in ("vocab_size", "hidden_size"):
        if key not in config:
            raise CheckpointMismatchError(f"{source}: config.json has no {key!r}")
    embedding = next(
        (v for k, v in checkpoint["state_dict"].items() if k.endswith(WORD_EMBEDDINGS)), None
    )
    if embedding is None:
        raise CheckpointMismatchError(f"{source}: the weights have no {WORD_EMBEDDINGS}")
    expected = (config["vocab_size"], config["hidden_size"])
    if tuple(embedding.shape) != expected:
        raise CheckpointMismatchError(
            f"{source}: {WORD_EMBEDDINGS} has shape {tuple(embedding.shape)} but config.json says "
            f"vocab_size={expected[0]}, hidden_size={expected[1]}"
        )
    if tokenizer.get_vocab_size() > config["vocab_size"]:  # a padded embedding table is fine
        raise CheckpointMismatchError(
            f"{source}: the tokenizer has {tokenizer.get_vocab_size()} tokens but config.json "
            f"vocab_size={config['vocab_size']}"
        )


def build_classifier(
    checkpoint: Mapping, task: GlueTask, source: str, seed: int | None = None
) -> BertForSequenceClassification:
    """The encoder from the checkpoint plus a fresh task head (any old head is dropped).

    With a seed, the head's N(0, initializer_range) weights come from that seed alone (not from
    whatever the encoder's init drew first), as transformers initializes a missing head after
    `set_seed(seed)`: the same seed gives the same head on both sides.
    """
    encoder_only = {
        **checkpoint,
        "state_dict": {
            k: v for k, v in checkpoint["state_dict"].items() if not k.startswith("classifier.")
        },
    }
    config = {k: v for k, v in checkpoint["config"].items() if k not in ("id2label", "label2id")}
    encoder_only["config"] = config
    try:
        model = model_from_checkpoint(
            encoder_only, BertForSequenceClassification, num_labels=task.num_labels, source=source
        )
    except ValueError as exc:
        raise CheckpointMismatchError(str(exc)) from exc
    if seed is not None:
        generator = torch.Generator().manual_seed(seed)
        std = config.get("initializer_range", 0.02)
        with torch.no_grad():
            model.classifier.weight.normal_(0.0, std, generator=generator)
            model.classifier.bias.zero_()
    return model.train()  # Lightning keeps module modes: dropout must be on for fine-tuning


def _mlflow_epoch_logger(run_id: str, prefix: str):
    """Logs a trial's dev metrics after every epoch to the task's MLflow run, step = epoch."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()

    def log(epoch: int, metrics: dict[str, dict[str, float]]) -> None:
        for split, values in metrics.items():
            for name, value in values.items():
                client.log_metric(run_id, f"{prefix}{split}_{name}", value, step=epoch)

    return log


def _loader(features: GlueFeatures, batch_size: int, seed: int | None = None) -> DataLoader:
    """Sequential, or shuffled with epoch e's order from seed + e.

    That is accelerate's seedable sampler, which transformers' Trainer uses: a trial sees the
    batches of the HF run with the same seed. DistributedSampler with one replica does exactly
    this, and Lightning calls its set_epoch.
    """
    sampler = None
    if seed is not None:
        sampler = DistributedSampler(features, num_replicas=1, rank=0, shuffle=True, seed=seed)
    return DataLoader(features, batch_size=batch_size, sampler=sampler, collate_fn=features.collate)


@torch.no_grad()
def predict(
    model: BertForSequenceClassification, task: GlueTask, features: GlueFeatures, batch_size: int
) -> torch.Tensor:
    model.eval()
    out = []
    for batch in _loader(features, batch_size):
        _, logits = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        out.append(logits.squeeze(-1) if task.is_regression else logits.argmax(-1))
    dtype = torch.float32 if task.is_regression else torch.long
    return torch.cat(out) if out else torch.empty(0, dtype=dtype)


def _prediction_frame(task: GlueTask, frame: pd.DataFrame, preds: torch.Tensor) -> pd.DataFrame:
    values = preds.double().numpy() if task.is_regression else preds.long().numpy()
    return pd.DataFrame(
        {
            "task": task.name,
            "split": frame["split"].to_numpy(),
            "idx": frame["idx"].to_numpy(),
            "label": frame["label"].to_numpy(),
            "prediction": values,
        }
    )


def finetune_task(
    task: GlueTask,
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    checkpoint: Mapping,
    config: FinetuneConfig,
    *,
    source: str = "checkpoint",
    mlflow_run_id: str | None = None,
    progress_bar: bool = True,
) -> FinetuneResult:
    """Runs the (lr, seed) grid and returns the best model as a checkpoint value plus its outputs.

    `dev` and `test` hold all dev (test) splits of the task, told apart by their `split`
    column; the first model selection signal is the dev score averaged over dev splits.
    """
    if len(train) == 0:
        raise ValueError(f"task {task.name}: the train split is empty")
    tokenizer = tokenizer_from_checkpoint(checkpoint, source, config.lowercase)
    check_checkpoint(checkpoint, tokenizer, source)
    max_positions = checkpoint["config"].get("max_position_embeddings", 512)
    if config.max_seq_length > max_positions:
        raise ValueError(
            f"max_seq_length={config.max_seq_length} exceeds the model's "
            f"max_position_embeddings={max_positions} ({source})"
        )
    train_features = GlueFeatures(
        encode_table(tokenizer, train, config.max_seq_length), train["label"], task.is_regression
    )
    dev_names = [s for s in task.dev_splits if (dev["split"] == s).any()]
    missing = sorted(set(task.dev_splits) - set(dev_names))
    if missing:
        raise ValueError(f"task {task.name}: no rows for dev split(s) {missing}")
    dev_frames = [dev[dev["split"] == s].reset_index(drop=True) for s in dev_names]
    dev_features = [
        GlueFeatures(
            encode_table(tokenizer, f, config.max_seq_length), f["label"], task.is_regression
        )
        for f in dev_frames
    ]
    steps = math.ceil(len(train_features) / config.batch_size) * config.epochs
    trials, best_module, best_trial = [], None, None
    for lr in config.learning_rates:
        for seed in config.seeds:
            model = build_classifier(checkpoint, task, source, seed)
            pl.seed_everything(seed, workers=True, verbose=False)  # dropout, as Trainer(seed=)
            prefix = f"lr_{lr:g}_seed_{seed}/"
            module = GlueModule(
                model,
                task,
                dev_names,
                float(lr),
                config.weight_decay,
                config.warmup_proportion,
                steps,
                _mlflow_epoch_logger(mlflow_run_id, prefix) if mlflow_run_id else None,
            )
            with tempfile.TemporaryDirectory() as root:
                trainer = pl.Trainer(
                    max_epochs=config.epochs,
                    accelerator=config.accelerator,
                    devices=1,
                    precision=config.precision,
                    deterministic=True,
                    logger=False,
                    enable_checkpointing=False,
                    enable_model_summary=False,
                    num_sanity_val_steps=0,
                    gradient_clip_val=config.gradient_clip_val,
                    enable_progress_bar=progress_bar,
                    default_root_dir=root,
                )
                trainer.fit(
                    module,
                    train_dataloaders=_loader(train_features, config.batch_size, seed),
                    val_dataloaders=[_loader(f, config.eval_batch_size) for f in dev_features],
                )
            trial = {
                "learning_rate": float(lr),
                "seed": int(seed),
                "best_epoch": module.best_epoch,
                "best_score": module.best_score,
                "history": module.history,
            }
            trials.append(trial)
            logger.info(
                "%s lr=%g seed=%d: best dev score %.4f at epoch %d",
                task.name,
                lr,
                seed,
                module.best_score,
                module.best_epoch,
            )
            if best_trial is None or module.best_score > best_trial["best_score"]:
                best_trial, best_module = trial, module
            del model
    assert best_module is not None and best_trial is not None
    model = best_module.model
    model.load_state_dict(best_module.best_state)
    dev_metrics = best_trial["history"][best_trial["best_epoch"]]["metrics"]
    dev_preds = [  # kept from the best epoch's dev pass: no extra pass over dev
        _prediction_frame(task, f, preds)
        for f, preds in zip(dev_frames, best_module.best_predictions, strict=True)
    ]
    test_features = GlueFeatures(
        encode_table(tokenizer, test, config.max_seq_length), test["label"], task.is_regression
    )
    test_preds = _prediction_frame(
        task, test, predict(model, task, test_features, config.eval_batch_size)
    )
    out = model_to_checkpoint(model, checkpoint.get("tokenizer_files"))
    if not task.is_regression:
        out["config"]["id2label"] = {str(i): name for i, name in enumerate(task.labels)}
        out["config"]["label2id"] = {name: i for i, name in enumerate(task.labels)}
    out["config"]["finetuning_task"] = task.name
    best = {k: best_trial[k] for k in ("learning_rate", "seed", "best_epoch", "best_score")}
    return FinetuneResult(
        checkpoint=out,
        dev_metrics=dev_metrics,
        best=best,
        trials=trials,
        dev_predictions=pd.concat(dev_preds, ignore_index=True),
        test_predictions=test_preds,
    )
