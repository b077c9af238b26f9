"""What every fine-tuning task shares (GLUE, NER, the feature-based tagger).

The paper's recipe: an (lr x seed) grid of trials, each trains for `epochs` epochs with the
shared AdamW + warmup/linear-decay schedule and Trainer; every dev pass is scored and the trial
and epoch with the best dev score win (a task may score a hold-out of train instead, then
`refit` the chosen rate on all of train). A task supplies its model, data and metrics.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import logging
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from bert_pipeline.training.config import FinetuneConfig, OptimizerParams, TrialParams
from bert_pipeline.training.core import (
    build_trainer,
    configure_adamw,
    mlflow_logger,
    predict_batches,
    sigterm_fails,
    warmup_steps_of,
)
from bert_pipeline.training.selection import best_mean_rate

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- data


class FinetuneDataModule(pl.LightningDataModule):
    """Train, dev (one loader per dev split, MNLI has two) and test sets; each has `collate`.

    Training batches are shuffled with epoch e's order drawn from seed + e: accelerate's seedable
    sampler, which transformers' Trainer uses, so a trial sees the batches of the HF run with the
    same seed. DistributedSampler with one replica does exactly this (Lightning calls set_epoch).
    """

    def __init__(
        self,
        train: Dataset,
        dev: list[Dataset],
        test: Dataset | None,
        batch_size: int,
        eval_batch_size: int,
        seed: int,
    ) -> None:
        super().__init__()
        self.train, self.dev, self.test = train, dev, test
        self.batch_size, self.eval_batch_size, self.seed = batch_size, eval_batch_size, seed

    def train_dataloader(self) -> DataLoader:
        sampler = DistributedSampler(
            self.train, num_replicas=1, rank=0, shuffle=True, seed=self.seed
        )
        return DataLoader(
            self.train, self.batch_size, sampler=sampler, collate_fn=self.train.collate
        )

    def val_dataloader(self) -> list[DataLoader]:
        return [sequential_loader(f, self.eval_batch_size) for f in self.dev]

    def predict_dataloader(self) -> DataLoader:
        return sequential_loader(self.test, self.eval_batch_size)


class Windows(Dataset):
    """A split's encoded windows (rows); a task adds its `collate`."""

    def __init__(self, windows: list):
        self.windows = windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int):
        return self.windows[i]


def pad_rows(rows: list[list[int]], value: int = 0) -> torch.Tensor:
    """[batch, longest row] long tensor of per-token values, padded with `value`."""
    return pad_sequence([torch.tensor(r) for r in rows], batch_first=True, padding_value=value)


def sequential_loader(dataset: Dataset, batch_size: int) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, collate_fn=dataset.collate)


# ---------------------------------------------------------------------------- one trial


class FinetuneModule(pl.LightningModule):
    """One trial: trains `model` with the shared optimizer and schedule; after every dev pass
    records the dev metrics and keeps the best epoch's weights and dev predictions.

    A task says how a batch becomes a loss (`loss`), what a dev batch yields (`outputs`) and
    how a dev split's outputs become (metrics, predictions) (`evaluate`) and the metrics a
    score (`score`). `dev_names` name the val dataloaders, in order.
    """

    def __init__(self, model: nn.Module, trial: TrialParams, dev_names: list[str]):
        super().__init__()
        hparams = {"dev_names": list(dev_names), **dataclasses.asdict(trial)}
        data_arguments = [  # a subclass's tables and windows are not hyperparameters
            a for a in inspect.signature(type(self).__init__).parameters if a not in hparams
        ]
        self.save_hyperparameters(hparams, ignore=data_arguments)
        self.model = model
        self.trial = trial
        self.history: list[dict] = []
        self.best_score = float("-inf")
        self.best_epoch = -1
        self.best_state: dict[str, torch.Tensor] | None = None
        self.best_predictions: list[Any] = []  # per dev split, of the best epoch
        # A refit's epoch, chosen before it trains: kept whatever dev says, then training stops
        self.keep_epoch: int | None = None
        self._outputs: dict[int, list] = {}

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def outputs(self, batch: dict[str, torch.Tensor]) -> Any:
        raise NotImplementedError

    def evaluate(self, split: int, outputs: list) -> tuple[dict[str, float], Any]:
        raise NotImplementedError

    def score(self, metrics: dict[str, dict[str, float]]) -> float:
        """The selection score of a dev pass from each split's metrics."""
        raise NotImplementedError

    def scored_on(self) -> str:
        """The split(s) `score` reads, as the logs name the best score."""
        return "dev"

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch)
        rows = len(next(iter(batch.values())))
        self.log("train_loss", loss, prog_bar=True, batch_size=rows)
        return loss

    def on_validation_epoch_start(self) -> None:
        self._outputs = {}

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._outputs.setdefault(dataloader_idx, []).append(self.outputs(batch))

    def on_validation_epoch_end(self) -> None:
        metrics, predictions = {}, []
        for i, outputs in sorted(self._outputs.items()):
            metrics[self.hparams.dev_names[i]], preds = self.evaluate(i, outputs)
            predictions.append(preds)
        score = self.score(metrics)
        self.history.append({"epoch": self.current_epoch, "score": score, "metrics": metrics})
        for split, values in metrics.items():
            for name, value in values.items():
                self.log(f"{split}_{name}", value, prog_bar=True)
        # NaN (e.g. Pearson of constant predictions) ranks lowest; the first epoch always counts
        comparable = score if math.isfinite(score) else -math.inf
        if self.keep_epoch is not None:
            keep = self.current_epoch == self.keep_epoch
            if keep:
                self.trainer.should_stop = True
        else:
            keep = self.best_state is None or comparable > self.best_score
        if keep:
            self.best_score, self.best_epoch = comparable, self.current_epoch
            self.best_state = copy.deepcopy(
                {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
            )
            self.best_predictions = predictions

    def configure_optimizers(self):
        total = int(self.trainer.estimated_stepping_batches)
        optimizer = OptimizerParams(
            lr=self.trial.learning_rate, weight_decay=self.trial.weight_decay
        )
        warmup = warmup_steps_of(self.trial.warmup_proportion, total)
        return configure_adamw(self, self.model, optimizer, warmup, total)


# ---------------------------------------------------------------------------- the grid


@dataclass
class GridResult:
    """The model a grid (or a refit) delivers, with the best weights loaded, its Trainer and
    data; `best`, the trial record the choice fell on; `trials`, every record of the run."""

    module: FinetuneModule
    trainer: pl.Trainer
    data: pl.LightningDataModule
    best: dict[str, Any]
    trials: list[dict[str, Any]]

    @property
    def dev_metrics(self) -> dict[str, dict[str, float]]:
        return self.module.history[self.module.best_epoch]["metrics"]

    def predict_test(self) -> torch.Tensor:
        """The kept model's outputs on the data's test split, one row per example."""
        return predict_batches(self.trainer, self.module, NOT_SAVED, datamodule=self.data).cpu()


BEST_KEYS = ("learning_rate", "seed", "best_epoch", "best_score")
NOT_SAVED = "the task's results were not saved"  # what a stopped fine-tuning run leaves
Build = Callable[[TrialParams], tuple[FinetuneModule, pl.LightningDataModule]]


def _fit(
    config: FinetuneConfig,
    build: Build,
    trial: TrialParams,
    prefix: str,
    mlflow_run_id: str | None,
    keep_epoch: int | None = None,
) -> tuple[FinetuneModule, pl.Trainer, pl.LightningDataModule]:
    """Trains one trial; the global RNG is seeded with the trial's seed after `build`, so
    dropout and shuffling depend on the seed alone (as `Trainer(seed=)`)."""
    module, data = build(trial)
    module.keep_epoch = keep_epoch
    pl.seed_everything(trial.seed, workers=True, verbose=False)
    trainer = build_trainer(
        config,
        loggers=mlflow_logger(mlflow_run_id, prefix=prefix),
        max_epochs=config.epochs,
        log_every_n_steps=config.log_every_n_steps,
    )
    with sigterm_fails(trainer, lambda: NOT_SAVED):
        trainer.fit(module, datamodule=data)
    return module, trainer, data


def run_grid(
    name: str,
    config: FinetuneConfig,
    build: Build,
    *,
    tags: list[str] | None = None,
    prefix: str = "",
    mlflow_run_id: str | None = None,
) -> GridResult:
    """Trains every (tag x lr x seed) trial; the best dev score wins (ties: the earlier trial).

    `build(trial)` returns a fresh module and its data. With `mlflow_run_id` every trial's
    metrics go to that run, prefixed by `prefix` and the trial's name (as are its log lines).
    """
    trials, best = [], None
    for tag in tags or [""]:
        for lr in config.learning_rates:
            for seed in config.seeds:
                trial = TrialParams(lr, seed, config.weight_decay, config.warmup_proportion, tag)
                label = f"{prefix}{trial.name}"
                module, trainer, data = _fit(config, build, trial, label, mlflow_run_id)
                record = {
                    **({"tag": tag} if tag else {}),
                    "learning_rate": float(lr),
                    "seed": int(seed),
                    "best_epoch": module.best_epoch,
                    "best_score": module.best_score,
                    "history": module.history,
                }
                trials.append(record)
                logger.info(
                    "%s %s: best %s score %.4f at epoch %d",
                    name,
                    label,
                    module.scored_on(),
                    module.best_score,
                    module.best_epoch,
                )
                if best is None or module.best_score > best[0]["best_score"]:
                    best = (record, module, trainer, data)
    assert best is not None
    record, module, trainer, data = best
    module.model.load_state_dict(module.best_state)
    return GridResult(module, trainer, data, record, trials)


def refit(
    name: str,
    config: FinetuneConfig,
    build: Build,
    trials: list[dict[str, Any]],
    *,
    mlflow_run_id: str | None = None,
) -> GridResult:
    """Trains every seed of the grid's best rate again on `build`'s data, with its trial's
    schedule, and keeps the epoch that trial chose, whatever the new dev passes say.

    For a grid that chose on a hold-out of train: the refit trains on all of train (the
    hold-out included), so the rows that only chose are not lost, and dev still only measures.
    The rate is `best_mean_rate`'s over `trials` (a grid's records); the delivered model is the
    refit of that rate's best trial. A grid run on several hold-outs has a trial per seed on
    each: the seed stops at the median (the lower of two) of their epochs and scores their
    mean, in a `best` record of its own. MLflow prefix: `refit_<trial>`.
    """
    chosen = best_mean_rate(trials)
    tag, lr = chosen[0].get("tag", ""), chosen[0]["learning_rate"]
    by_seed: dict[int, list[dict]] = {}
    for t in chosen:
        by_seed.setdefault(t["seed"], []).append(t)
    seeds = [_pooled(group) for group in by_seed.values()]
    best = max(seeds, key=lambda t: t["best_score"])
    refits, kept = [], None
    for t in seeds:
        trial = TrialParams(lr, t["seed"], config.weight_decay, config.warmup_proportion, tag)
        module, trainer, data = _fit(
            config, build, trial, f"refit_{trial.name}", mlflow_run_id, t["best_epoch"]
        )
        refits.append(
            {
                **({"tag": tag} if tag else {}),
                "learning_rate": float(lr),
                "seed": int(t["seed"]),
                "epoch": module.best_epoch,
                "history": module.history,
            }
        )
        logger.info(
            "%s refit_%s: kept epoch %d, trained on all of its data",
            name,
            trial.name,
            t["best_epoch"],
        )
        if t is best:
            kept = (module, trainer, data)
    assert kept is not None
    module, trainer, data = kept
    module.model.load_state_dict(module.best_state)
    return GridResult(module, trainer, data, best, refits)


def _pooled(trials: list[dict]) -> dict:
    """One seed's trials of one cell as one: itself, or over several hold-outs the median
    epoch (an epoch that was chosen) and the mean score."""
    if len(trials) == 1:
        return trials[0]
    first = trials[0]
    return {
        **({"tag": first["tag"]} if "tag" in first else {}),
        "learning_rate": first["learning_rate"],
        "seed": first["seed"],
        "best_epoch": statistics.median_low(t["best_epoch"] for t in trials),
        "best_score": statistics.fmean(t["best_score"] for t in trials),
    }


def best_summary(result: GridResult) -> dict[str, Any]:
    """The winning trial's hyperparameters and score, for records and MLflow."""
    keys = ("tag", *BEST_KEYS) if "tag" in result.best else BEST_KEYS
    return {k: result.best[k] for k in keys}
