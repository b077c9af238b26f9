"""Thin Kedro nodes around bert_pipeline.swag: example tables, fine-tuning, test probabilities."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from bert_pipeline.swag.config import swag_params
from bert_pipeline.swag.data import COLUMNS, ENDINGS, split_by_context
from bert_pipeline.tracking import task_run

logger = logging.getLogger(__name__)


def build_swag_tables(
    raw: dict[str, pd.DataFrame], params: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Train, dev and test tables: SWAG's train/val/test files, or one labelled file split by
    context (`data.dev_share`, `data.split_seed`); `max_train_examples` / `max_dev_examples`
    keep the first that many for quick runs."""
    data = swag_params(params).data
    if "all" in raw:
        train, dev = split_by_context(raw["all"], data.dev_share, data.split_seed)
        test = pd.DataFrame(columns=COLUMNS).astype(raw["all"].dtypes.to_dict())
    else:
        train, dev = raw["train"], raw["dev"]
        test = raw.get("test", raw["dev"].head(0))
    train, dev = train.head(data.max_train_examples), dev.head(data.max_dev_examples)
    logger.info("SWAG: %d train, %d dev, %d test examples", len(train), len(dev), len(test))
    if len(train) + len(dev) < 100:
        logger.warning(
            "SWAG: %d labelled examples measure nothing (SWAG has 73k train, 20k val); point "
            "swag_dir at SWAG's train.csv/val.csv for a result",
            len(train) + len(dev),
        )
    return train, dev, test.reset_index(drop=True)


def finetune_swag_model(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    pretrained: dict,
    params: dict[str, Any],
) -> tuple[dict, dict, pd.DataFrame, pd.DataFrame]:
    """Fine-tunes BERT for SWAG: the best model, its record, and the dev and test probabilities
    of each ending (the test file is the leaderboard's submission)."""
    from bert_pipeline.model.checkpoint import checkpoint_source
    from bert_pipeline.swag.finetune import finetune_swag

    swag = swag_params(params)
    config = swag.training
    source = checkpoint_source(pretrained, "swag.pretrained_model", "swag_model_dir")
    inputs = {"swag_train": (train, "training"), "swag_dev": (dev, "evaluation")}
    with task_run("swag", {}, config, inputs, pretrained=pretrained) as run:
        result = finetune_swag(
            train, dev, test, pretrained, config, source=source, mlflow_run_id=run.run_id
        )
        record = {**result.record, "mlflow_run_id": run.run_id}
        accuracy = record["dev_metrics"]["accuracy"]
        logger.info("SWAG best %s: dev accuracy %.4f", record["best"], accuracy)
        example = train[["context", "start", *ENDINGS]].head(2)
        logged = run.log_model(
            result.checkpoint,
            example,
            name="bert-swag",
            metrics={"best_dev_accuracy": accuracy},
            key_metric="best_dev_accuracy",
            registered_name=swag.registered_model_name,
            max_seq_length=config.max_seq_length,
        )
        if logged is not None:
            record["mlflow_model"] = logged
        run.log_results(
            params={f"best_{k}": v for k, v in record["best"].items()},
            files={"swag_metrics.json": record},
        )
        run.describe(f"SWAG fine-tuned from {source}: dev accuracy {accuracy:.4f}.")
    return result.checkpoint, record, result.dev_probabilities, result.test_probabilities
