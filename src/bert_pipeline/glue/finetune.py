"""Fine-tunes one GLUE task over a learning-rate x seed grid and keeps the best run on dev.

As in the BERT paper: every (lr, seed) trial trains all weights for `epochs` epochs; the trial
and epoch with the best dev score win (score = the task's metrics averaged, MNLI m/mm
averaged). No Kedro here; MLflow is used only when a run id is given.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import pandas as pd
import torch
from tokenizers import Tokenizer

from bert_pipeline.data.tokenizer import tokenizer_from_files
from bert_pipeline.glue.features import GlueFeatures, encode_table
from bert_pipeline.glue.module import GlueDataModule, GlueModule, TrialParams, sequential_loader
from bert_pipeline.glue.tasks import GlueTask
from bert_pipeline.model import BertForSequenceClassification
from bert_pipeline.model.checkpoint import model_from_checkpoint, model_to_checkpoint
from bert_pipeline.training.config import ConfigError, DeviceParams, parse_params
from bert_pipeline.training.core import build_trainer, mlflow_logger

logger = logging.getLogger(__name__)

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


class CheckpointMismatchError(ValueError):
    """The checkpoint, its config.json and the tokenizer disagree."""


@dataclass
class FinetuneConfig(DeviceParams):
    """Hyperparameters of one task (paper defaults: batch 32, 3 epochs, lr in {5,4,3,2}e-5)."""

    learning_rates: list[float] = field(default_factory=lambda: [2e-5])
    seeds: list[int] = field(default_factory=lambda: [42])
    batch_size: int = 32
    eval_batch_size: int = 128
    epochs: int = 3
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    max_seq_length: int = 128
    lowercase: bool = True
    log_every_n_steps: int = 10
    deterministic: Any = True

    @classmethod
    def from_params(cls, params: Mapping[str, Any], where: str) -> FinetuneConfig:
        """Typed and checked; errors name the parameter as `<where>.<key>`."""
        return parse_params(cls, params, where)

    def check(self, root: str) -> None:
        self.check_devices(root)
        for name in ("learning_rates", "seeds"):
            if not getattr(self, name):
                raise ConfigError(f"parameter {root}.{name} must be a non-empty list")
        for name in (
            "batch_size",
            "eval_batch_size",
            "epochs",
            "max_seq_length",
            "log_every_n_steps",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"parameter {root}.{name} must be >= 1, got {getattr(self, name)}"
                )
        if not 0 <= self.warmup_proportion < 1:
            raise ConfigError(f"parameter {root}.warmup_proportion must be in [0, 1)")
        if self.devices != 1 or self.num_nodes != 1:
            raise ConfigError(f"parameter {root}.devices / num_nodes: a task trains on one device")
        if min(self.learning_rates) <= 0 or self.weight_decay < 0:
            raise ConfigError(
                f"parameter {root}.learning_rates must be > 0 and weight_decay >= 0, got "
                f"{self.learning_rates} and {self.weight_decay}"
            )


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
    return tokenizer_from_files(files, lowercase, source)


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


@torch.no_grad()
def predict(
    model: BertForSequenceClassification, task: GlueTask, features: GlueFeatures, batch_size: int
) -> torch.Tensor:
    """Predictions of a saved model, outside any Trainer (tests, notebooks)."""
    model.eval()
    out = []
    for batch in sequential_loader(features, batch_size):
        _, logits = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        out.append(logits.squeeze(-1) if task.is_regression else logits.argmax(-1))
    dtype = torch.float32 if task.is_regression else torch.long
    return torch.cat(out) if out else torch.empty(0, dtype=dtype)


def encode(task: GlueTask, tokenizer: Tokenizer, frame: pd.DataFrame, length: int) -> GlueFeatures:
    return GlueFeatures(encode_table(tokenizer, frame, length), frame["label"], task.is_regression)


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
) -> FinetuneResult:
    """Runs the (lr, seed) grid and returns the best model as a checkpoint value plus its outputs.

    `dev` and `test` hold all dev (test) splits of the task, told apart by their `split`
    column; the model selection signal is the dev score averaged over dev splits. With
    `mlflow_run_id` every trial's metrics go to that run, prefixed by the trial's name.
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
    dev_names = [s for s in task.dev_splits if (dev["split"] == s).any()]
    missing = sorted(set(task.dev_splits) - set(dev_names))
    if missing:
        raise ValueError(f"task {task.name}: no rows for dev split(s) {missing}")
    dev_frames = [dev[dev["split"] == s].reset_index(drop=True) for s in dev_names]
    length = config.max_seq_length
    train_features = encode(task, tokenizer, train, length)
    dev_features = [encode(task, tokenizer, f, length) for f in dev_frames]
    test_features = encode(task, tokenizer, test, length)

    trials, best = [], None
    for lr in config.learning_rates:
        for seed in config.seeds:
            trial = TrialParams(lr, seed, config.weight_decay, config.warmup_proportion)
            model = build_classifier(checkpoint, task, source, seed)
            pl.seed_everything(seed, workers=True, verbose=False)  # dropout, as Trainer(seed=)
            module = GlueModule(model, task, dev_names, trial)
            data = GlueDataModule(
                train_features,
                dev_features,
                test_features,
                config.batch_size,
                config.eval_batch_size,
                seed,
            )
            trainer = build_trainer(
                config,
                loggers=mlflow_logger(mlflow_run_id, prefix=trial.name),
                max_epochs=config.epochs,
                log_every_n_steps=config.log_every_n_steps,
            )
            trainer.fit(module, datamodule=data)
            record = {
                "learning_rate": float(lr),
                "seed": int(seed),
                "best_epoch": module.best_epoch,
                "best_score": module.best_score,
                "history": module.history,
            }
            trials.append(record)
            logger.info(
                "%s lr=%g seed=%d: best dev score %.4f at epoch %d",
                task.name,
                lr,
                seed,
                module.best_score,
                module.best_epoch,
            )
            if best is None or module.best_score > best[0]["best_score"]:
                best = (record, module, trainer, data)
    assert best is not None
    best_trial, module, trainer, data = best
    module.model.load_state_dict(module.best_state)
    dev_metrics = best_trial["history"][best_trial["best_epoch"]]["metrics"]
    dev_preds = [  # kept from the best epoch's dev pass: no extra pass over dev
        _prediction_frame(task, f, preds)
        for f, preds in zip(dev_frames, module.best_predictions, strict=True)
    ]
    test_preds = _prediction_frame(task, test, _predict_test(trainer, module, data, task))
    out = model_to_checkpoint(
        module.model,
        checkpoint.get("tokenizer_files"),
        labels=None if task.is_regression else task.labels,
        finetuning_task=task.name,
    )
    best_keys = ("learning_rate", "seed", "best_epoch", "best_score")
    return FinetuneResult(
        checkpoint=out,
        dev_metrics=dev_metrics,
        best={k: best_trial[k] for k in best_keys},
        trials=trials,
        dev_predictions=pd.concat(dev_preds, ignore_index=True),
        test_predictions=test_preds,
    )


def _predict_test(
    trainer: pl.Trainer, module: GlueModule, data: GlueDataModule, task: GlueTask
) -> torch.Tensor:
    if len(data.test) == 0:
        return torch.empty(0, dtype=torch.float32 if task.is_regression else torch.long)
    return torch.cat(trainer.predict(module, datamodule=data)).cpu()
