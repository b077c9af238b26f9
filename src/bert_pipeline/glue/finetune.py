"""Fine-tunes one GLUE task over a learning-rate x seed grid and keeps the best run.

As in the BERT paper: every (lr, seed) trial trains all weights for `epochs` epochs; the trial
and epoch with the best dev score win (score = the task's metrics averaged, MNLI m/mm
averaged), or with the best score on a held-out slice of train, which `refit` then trains on
too. The grid, optimizer and Trainer are `bert_pipeline.training.finetune`'s. No Kedro here;
MLflow is used only when a run id is given.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from tokenizers import Tokenizer

from bert_pipeline.glue.config import GlueConfig
from bert_pipeline.glue.features import GlueFeatures, encode_table
from bert_pipeline.glue.module import GlueModule
from bert_pipeline.glue.tasks import HOLDOUT, GlueTask
from bert_pipeline.model import BertForSequenceClassification
from bert_pipeline.model.checkpoint import (
    check_checkpoint,
    model_to_checkpoint,
    tokenizer_from_checkpoint,
    with_new_head,
)
from bert_pipeline.model.config import dropout_fields
from bert_pipeline.training.config import TrialParams
from bert_pipeline.training.finetune import (
    FinetuneDataModule,
    GridResult,
    best_summary,
    refit,
    run_grid,
    sequential_loader,
)


@dataclass
class FinetuneResult:
    checkpoint: dict
    dev_metrics: dict[str, dict[str, float]]  # of the delivered model, dev splits only
    best: dict[str, Any]
    trials: list[dict[str, Any]]
    dev_predictions: pd.DataFrame
    test_predictions: pd.DataFrame
    selected_on: dict[str, dict[str, float]]  # the split(s) that chose: train hold-out or dev
    refits: list[dict[str, Any]]  # the chosen rate's seeds trained again on all of train
    trained_on: int  # rows of train the delivered model was trained on


def build_classifier(
    checkpoint: Mapping,
    task: GlueTask,
    source: str,
    seed: int | None = None,
    classifier_pooling: str = "cls",
    head_lstm_size: int | None = None,
    dropout: float | None = None,
) -> BertForSequenceClassification:
    """The encoder from the checkpoint plus a fresh task head seeded by `seed`; `dropout` (hidden
    and attention) replaces the checkpoint config's when given."""
    return with_new_head(
        checkpoint,
        BertForSequenceClassification,
        task.num_labels,
        source,
        seed,
        classifier_pooling=classifier_pooling,
        head_lstm_size=head_lstm_size,
        **dropout_fields(dropout),
    )


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
    config: GlueConfig,
    *,
    source: str = "checkpoint",
    mlflow_run_id: str | None = None,
) -> FinetuneResult:
    """Runs the (lr, seed) grid, once per rate where `dropout` lists several, and returns the
    best model as a checkpoint value plus its outputs.

    `dev` and `test` hold all dev (test) splits of the task, told apart by their `split`
    column; the model selection signal is the dev score averaged over dev splits, or the
    train hold-out's (`selection_holdout`; with `holdouts` the grid runs once per hold-out and
    chooses on all of their trials). With `refit` the chosen rate's seeds then train again on
    all of train, each stopped at its chosen epoch, and the model and dev metrics are the
    refit's. With `mlflow_run_id` every trial's metrics go to that run, prefixed by the
    trial's name.
    """
    if len(train) == 0:
        raise ValueError(f"task {task.name}: the train split is empty")
    tokenizer = tokenizer_from_checkpoint(checkpoint, source, config.lowercase)
    check_checkpoint(checkpoint, tokenizer, source, config.max_seq_length)
    dev_names = [s for s in task.dev_splits if (dev["split"] == s).any()]
    missing = sorted(set(task.dev_splits) - set(dev_names))
    if missing:
        raise ValueError(f"task {task.name}: no rows for dev split(s) {missing}")
    dev_frames = [dev[dev["split"] == s].reset_index(drop=True) for s in dev_names]
    with_holdout = config.selection_holdout > 0
    val_names = [HOLDOUT, *dev_names] if with_holdout else dev_names
    length = config.max_seq_length
    dev_features = [encode(task, tokenizer, f, length) for f in dev_frames]
    test_features = encode(task, tokenizer, test, length)
    dropouts = config.dropout_grid

    def builder(
        frame: pd.DataFrame, names: list[str], validated: list[GlueFeatures]
    ) -> Callable[[TrialParams], tuple[GlueModule, FinetuneDataModule]]:
        train_features = encode(task, tokenizer, frame, length)

        def build(trial: TrialParams) -> tuple[GlueModule, FinetuneDataModule]:
            model = build_classifier(
                checkpoint,
                task,
                source,
                trial.seed,
                config.classifier_pooling,
                config.head_lstm_size,
                dropouts[trial.tag],
            )
            data = FinetuneDataModule(
                train_features,
                validated,
                test_features,
                config.batch_size,
                config.eval_batch_size,
                trial.seed,
            )
            return GlueModule(model, task, names, trial), data

        return build

    pooled = config.holdouts > 1
    trials: list[dict[str, Any]] = []
    for seed in config.holdout_seeds:
        trained, holdout = _hold_out(task, train, config.selection_holdout, seed)
        # the hold-out is validated first; the module chooses on it alone
        held = [encode(task, tokenizer, holdout, length)] if holdout is not None else []
        fitted = run_grid(
            task.name,
            config,
            builder(trained, val_names, held + dev_features),
            tags=list(dropouts),
            prefix=f"holdout_{seed}_" if pooled else "",
            mlflow_run_id=mlflow_run_id,
        )
        trials += fitted.trials
        if pooled:  # the refit delivers the model: each grid's own best may go
            for record in fitted.trials:
                record["holdout_seed"] = seed
            fitted = None
    if config.refit:
        build_all = builder(train, dev_names, dev_features)
        fitted = refit(task.name, config, build_all, trials, mlflow_run_id=mlflow_run_id)
    assert fitted is not None
    # a dropout grid's tag, as the rate it sets (a pooled choice's best is a record of its own)
    for record in [*trials, *fitted.trials, fitted.best]:
        if record.get("tag"):
            record["dropout"] = dropouts[record["tag"]]
    best = best_summary(fitted)
    if "dropout" in fitted.best:
        best["dropout"] = fitted.best["dropout"]
    selected_on = _selected_on(trials, fitted.best)
    names = fitted.module.hparams.dev_names
    dev_preds = [  # kept from the best epoch's dev pass: no extra pass over dev
        _prediction_frame(task, frame, fitted.module.best_predictions[names.index(name)])
        for name, frame in zip(dev_names, dev_frames, strict=True)
    ]
    test_preds = _prediction_frame(task, test, _predict_test(fitted, task))
    out = model_to_checkpoint(
        fitted.module.model,
        tokenizer,
        labels=task.label_names,
        finetuning_task=task.name,
    )
    return FinetuneResult(
        checkpoint=out,
        dev_metrics={k: v for k, v in fitted.dev_metrics.items() if k != HOLDOUT},
        best=best,
        trials=trials,
        dev_predictions=pd.concat(dev_preds, ignore_index=True),
        test_predictions=test_preds,
        selected_on={HOLDOUT: selected_on[HOLDOUT]} if with_holdout else selected_on,
        refits=fitted.trials if config.refit else [],
        trained_on=len(train) if config.refit else len(trained),
    )


def _selected_on(trials: list[dict[str, Any]], best: Mapping[str, Any]) -> dict:
    """The metrics that chose the delivered trial at its chosen epoch: over several hold-outs,
    each metric's mean over the trials of its cell and seed."""

    def key(t: Mapping[str, Any]) -> tuple:
        return t.get("tag", ""), t["learning_rate"], t["seed"]

    at_best = [t["history"][t["best_epoch"]]["metrics"] for t in trials if key(t) == key(best)]
    return {
        split: {name: statistics.fmean(m[split][name] for m in at_best) for name in values}
        for split, values in at_best[0].items()
    }


def _hold_out(
    task: GlueTask, train: pd.DataFrame, share: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(the rows trained on, the rows held out to choose on or None), `share` of train drawn
    with `seed`: the same rows for every trial, so trials compare.

    A classification task draws `share` of each label (stratified), so the hold-out keeps
    train's label shares: RTE's plain draw of seed 0 held 53% not_entailment against train's
    50%, which rewarded trials leaning to that label (dev has 47%).

    Where train holds the phrases of its sentences (SST-2), sentences are drawn: a held-out
    sentence's phrases are not trained on, or its label would leak through them, and only the
    sentence is scored, as dev holds sentences only."""
    if not share:
        return train, None
    train = train.reset_index(drop=True)
    rows = np.arange(len(train))
    sentence = np.array(_containing_row(train["text_a"])) if task.train_has_phrases else rows
    units = train[sentence == rows]
    pool = units if task.is_regression else units.groupby("label", group_keys=False)
    held = pool.sample(frac=share, random_state=seed)
    if len(held) == 0 or len(held) == len(units):
        kind = "sentences" if task.train_has_phrases else "rows"
        raise ValueError(
            f"task {task.name}: selection_holdout={share} of {len(units)} "
            f"train {kind} leaves none to hold out or none to train on"
        )
    rest = train[~np.isin(sentence, held.index)].reset_index(drop=True)
    return rest, held.reset_index(drop=True).assign(split=HOLDOUT)


def _containing_row(texts: pd.Series) -> list[int]:
    """For each row, the position of the longest row whose words contain its words as one
    contiguous span (itself if none does): the sentence a phrase was cut from."""
    words = [tuple(str(t).split()) for t in texts]
    rows_of: dict[tuple[str, ...], list[int]] = {}
    for i, w in enumerate(words):
        rows_of.setdefault(w, []).append(i)
    containing = [-1] * len(words)
    for i in sorted(range(len(words)), key=lambda i: -len(words[i])):
        if containing[i] >= 0:
            continue
        containing[i] = i
        w = words[i]
        for a in range(len(w)):
            for b in range(a + 1, len(w) + 1):
                for j in rows_of.get(w[a:b], ()):
                    if containing[j] < 0:
                        containing[j] = i
    return containing


def _predict_test(fitted: GridResult, task: GlueTask) -> torch.Tensor:
    if len(fitted.data.test) == 0:
        return torch.empty(0, dtype=torch.float32 if task.is_regression else torch.long)
    return fitted.predict_test()
