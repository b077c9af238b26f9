"""Thin Kedro nodes around bert_pipeline.squad: tables, fine-tuning, official predictions."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pandas as pd

from bert_pipeline.squad.config import squad_params
from bert_pipeline.squad.data import official_predictions, squad_version
from bert_pipeline.tracking import task_run

logger = logging.getLogger(__name__)

# What the served reader needs of the training config to answer as the dev evaluation did.
READER_OPTIONS = (
    "max_seq_length",
    "doc_stride",
    "max_query_length",
    "n_best_size",
    "max_answer_length",
)


def build_squad_tables(
    raw: dict[str, pd.DataFrame], params: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train and dev question tables; `data.max_train_questions` / `max_dev_questions` keep
    the first that many (whole articles' order kept) for quick runs."""
    data = squad_params(params).data
    train, dev = raw["train"], raw["dev"]
    if data.max_train_questions is not None:
        train = train.head(data.max_train_questions)
    if data.max_dev_questions is not None:
        dev = dev.head(data.max_dev_questions)
    logger.info(
        "SQuAD: %d train, %d dev questions (%d dev unanswerable)",
        len(train),
        len(dev),
        int(dev["is_impossible"].sum()),
    )
    return train.reset_index(drop=True), dev.reset_index(drop=True)


def finetune_squad_model(
    train: pd.DataFrame, dev: pd.DataFrame, pretrained: dict, params: dict[str, Any]
) -> tuple[dict, dict, str, dict]:
    """Fine-tunes BERT for SQuAD: the best model, its record, predictions.json (official format)
    and the null odds (v2.0: no-answer score minus best span score per question)."""
    from bert_pipeline.model.checkpoint import checkpoint_source
    from bert_pipeline.squad.finetune import finetune_squad

    squad = squad_params(params)
    config = squad.training
    source = checkpoint_source(pretrained, "squad_pretrained_model", "squad_model_dir")
    tags = {"squad_version": squad_version(train, dev)}
    inputs = {"squad_train": (train, "training"), "squad_dev": (dev, "evaluation")}
    with task_run("squad", tags, config, inputs, pretrained=pretrained) as run:
        result = finetune_squad(
            train, dev, pretrained, config, source=source, mlflow_run_id=run.run_id
        )
        record = {**result.record, "mlflow_run_id": run.run_id}
        metrics = record["dev_metrics"]
        logger.info(
            "SQuAD %s best %s: dev EM %.2f, F1 %.2f",
            record["version"],
            record["best"],
            metrics["exact_match"],
            metrics["f1"],
        )
        logged = run.log_model(
            result.checkpoint,
            dev[["question", "context"]].head(2),
            name="bert-squad",
            metrics={f"best_dev_{k}": v for k, v in metrics.items()},
            key_metric="best_dev_f1",
            registered_name=squad.registered_model_name,
            **{k: getattr(config, k) for k in READER_OPTIONS},
        )
        if logged is not None:
            record["mlflow_model"] = logged
        run.log_results(
            params={f"best_{k}": v for k, v in record["best"].items()},
            files={"squad_metrics.json": record, "predictions.json": result.predictions},
        )
        run.describe(
            f"SQuAD {record['version']} fine-tuned from {source}: dev EM "
            f"{metrics['exact_match']:.2f}, F1 {metrics['f1']:.2f}."
        )
    # No valid span at all: never answer; the largest float keeps the file strict JSON.
    null_odds = {k: min(float(v), sys.float_info.max) for k, v in result.null_odds.items()}
    return result.checkpoint, record, official_predictions(result.predictions), null_odds
