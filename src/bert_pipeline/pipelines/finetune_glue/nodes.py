"""Thin Kedro nodes around bert_pipeline.glue: tables, fine-tuning, summary, submission."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pandas as pd

from bert_pipeline.glue.config import GlueConfig, glue_params
from bert_pipeline.glue.report import (
    submission_files,
    summary_markdown,
    summary_metrics,
    summary_table,
)
from bert_pipeline.glue.tasks import get_task
from bert_pipeline.model.card import glue_card
from bert_pipeline.tracking import TaskRun, describe_run, task_run

if TYPE_CHECKING:
    from bert_pipeline.glue.finetune import FinetuneResult

logger = logging.getLogger(__name__)


def _sample(frame: pd.DataFrame, limit: int | None, seed: int) -> pd.DataFrame:
    """At most `limit` rows per split, a seeded random subset in the original order."""
    if limit is None:
        return frame.reset_index(drop=True)
    parts = [
        part.sample(n=min(limit, len(part)), random_state=seed).sort_index()
        for _, part in frame.groupby("split", sort=False)
    ]
    return pd.concat(parts).reset_index(drop=True) if parts else frame


def build_task_tables(
    raw: dict[str, pd.DataFrame], params: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Train, dev (all dev splits) and test (all test splits) tables of one task.

    `params.data.max_train_examples` / `max_eval_examples` subsample for quick runs (test
    splits are never subsampled, so submissions stay complete).
    """
    data = glue_params(params).data
    task = get_task(str(next(f for f in raw.values() if len(f))["task"].iloc[0]))
    train = _sample(raw["train"], data.max_train_examples, data.sample_seed)
    dev = _sample(
        pd.concat([raw[s] for s in task.dev_splits], ignore_index=True),
        data.max_eval_examples,
        data.sample_seed,
    )
    test = pd.concat([raw[s] for s in task.test_splits], ignore_index=True)
    logger.info(
        "%s: %d train, %d dev, %d test examples", task.name, len(train), len(dev), len(test)
    )
    return train, dev, test


def task_config(task: str, params: dict[str, Any]) -> GlueConfig:
    """`finetune_glue.defaults` overridden by `finetune_glue.hyperparameters.<task>`."""
    return glue_params(params).task_config(task)


def _best_metrics(result: FinetuneResult) -> dict[str, float]:
    """Best dev metrics and the task's score: the run's and its model's metrics."""
    return {
        f"best_{split}_{name}": value
        for split, values in result.dev_metrics.items()
        for name, value in values.items()
    } | {"best_score": result.best["best_score"]}


def _log_task_run(run: TaskRun, result: FinetuneResult, record: dict) -> None:
    """Chosen lr/seed/epoch, dev record and predictions (metrics: with the model, below)."""
    best = result.best
    run.log_results(
        params={
            "best_learning_rate": best["learning_rate"],
            "best_seed": best["seed"],
            "best_epoch": best["best_epoch"],
            **({"best_dropout": best["dropout"]} if "dropout" in best else {}),
        },
        files={
            "dev_metrics.json": record,
            "predictions/dev_predictions.csv": result.dev_predictions,
            "predictions/test_predictions.csv": result.test_predictions,
        },
    )


def _registered_name(params: dict[str, Any], task: str) -> str | None:
    """`finetune_glue.registered_model_name` with {task} filled in; empty: log, do not register."""
    template = params.get("registered_model_name")
    return template.format(task=task) if template else None


def finetune_glue_task(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    pretrained: dict,
    params: dict[str, Any],
) -> tuple[dict, dict, pd.DataFrame, pd.DataFrame]:
    """Fine-tunes one task; returns the best checkpoint, its dev record and predictions.

    Inside a kedro-mlflow run, the task gets its own nested MLflow run with its
    hyperparameters, per-epoch dev metrics of every trial, predictions and the best model as
    a registered pyfunc model (`bert_pipeline.serving`).
    """
    from bert_pipeline.glue.finetune import finetune_task
    from bert_pipeline.glue.metrics import task_score
    from bert_pipeline.model.checkpoint import checkpoint_source, random_like

    task = get_task(str(train["task"].iloc[0]))
    config = task_config(task.name, params)
    source = checkpoint_source(pretrained, "glue_pretrained_model", "glue_model_dir")
    lineage = pretrained
    if config.random_init_seed is not None:
        pretrained, lineage = random_like(pretrained, config.random_init_seed), None
        source = f"a random init (seed {config.random_init_seed}) of {source}'s architecture"
    inputs = {
        f"glue_{task.name}_train": (train, "training"),
        f"glue_{task.name}_dev": (dev, "evaluation"),
    }
    with task_run(
        f"glue_{task.name}",
        {"glue_task": task.name},
        config,
        inputs,
        pretrained=lineage,
        task=task.name,
        train_examples=len(train),
        dev_examples=len(dev),
    ) as run:
        result = finetune_task(
            task, train, dev, test, pretrained, config, source=source, mlflow_run_id=run.run_id
        )
        record = {
            "task": task.name,
            "dev_metrics": result.dev_metrics,
            "score": task_score(result.dev_metrics),
            "selected_on": result.selected_on,
            "best": result.best,
            "train_examples": len(train),
            "trained_on": result.trained_on,
            "dev_examples": len(dev),
            "trials": result.trials,
            **({"refits": result.refits} if result.refits else {}),
            "mlflow_run_id": run.run_id,
        }
        name = _registered_name(params, task.name)
        result.checkpoint["model_card"] = glue_card(
            result.checkpoint["config"], task.name, record, source, registered_name=name
        )
        logged = run.log_model(
            result.checkpoint,
            dev[["text_a", "text_b"]].head(2),
            name=f"bert-glue-{task.name}",
            metrics=_best_metrics(result),
            key_metric="best_score",
            registered_name=name,
            max_seq_length=config.max_seq_length,
        )
        if logged is not None:
            record["mlflow_model"] = logged
        _log_task_run(run, result, record)
        scored_on = ", ".join(result.selected_on)  # the train hold-out or the dev split(s)
        if config.holdouts > 1:
            scored_on = f"mean {scored_on} (hold-outs {config.holdout_seeds})"
        best = result.best
        dropout = f"dropout {best['dropout']}, " if "dropout" in best else ""
        run.describe(
            f"GLUE {task.name} fine-tuned from {source}: best {scored_on} score "
            f"{100 * best['best_score']:.2f} (lr {best['learning_rate']}, {dropout}seed "
            f"{best['seed']}, epoch {best['best_epoch'] + 1} of {config.epochs})"
            + (f", then refit on all {result.trained_on} train rows." if result.refits else ".")
        )
    return result.checkpoint, record, result.dev_predictions, result.test_predictions


def summarize_glue(*records: dict) -> tuple[pd.DataFrame, str, dict]:
    """Summary table (CSV + markdown) and the task scores / GLUE average for MLflow."""
    table = summary_table(records)
    metrics = summary_metrics(table)
    if "average" in metrics:
        describe_run(f"GLUE average {metrics['average']['value']:.1f} over {len(records)} tasks.")
    return table, summary_markdown(table), metrics


def build_submission(*test_predictions: pd.DataFrame) -> dict[str, str]:
    """GLUE leaderboard files, one `<TASK>.tsv` per task (MNLI-m / MNLI-mm), for the zip."""
    return submission_files(test_predictions)
