"""Thin Kedro nodes around bert_pipeline.ner: tables, the two taggers, CoNLL predictions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pandas as pd

from bert_pipeline.ner.config import ner_config, ner_params
from bert_pipeline.tracking import TaskRun, task_run

if TYPE_CHECKING:
    from bert_pipeline.ner.finetune import NerResult

logger = logging.getLogger(__name__)


def build_ner_tables(
    raw: dict[str, pd.DataFrame], params: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Train, dev and test sentence tables; `data.max_train_sentences` keeps the first that
    many train sentences (whole documents' order kept) for quick runs."""
    limit = ner_params(params).data.max_train_sentences
    train = raw["train"] if limit is None else raw["train"].head(limit)
    tables = (train.reset_index(drop=True), raw["dev"], raw["test"])
    logger.info(
        "CoNLL: %s sentences (train, dev, test), %s words",
        [len(t) for t in tables],
        [int(t["tokens"].map(len).sum()) for t in tables],
    )
    return tables


def _source(checkpoint: dict) -> str:
    from bert_pipeline.model.checkpoint import checkpoint_source

    return checkpoint_source(checkpoint, "ner_pretrained_model", "ner_model_dir")


def _inputs(tables: tuple) -> dict:
    """The tagger's data as its child run's dataset inputs."""
    splits = ("train", "dev", "test")
    return {
        f"conll_{split}": (table, "training" if split == "train" else split)
        for table, split in zip(tables, splits, strict=True)
    }


def _report(result: NerResult, run: TaskRun, what: str, model: dict | None = None) -> None:
    """Metrics, parameters, record and description of the run; `model` (`TaskRun.log_model`'s
    arguments): the fine-tuned tagger, a BERT folder, logged with the metrics."""
    record = result.record
    dev, test = record["dev_metrics"]["f1"], record["test_metrics"]["f1"]
    logger.info("NER best %s: dev F1 %.4f, test F1 %.4f", record["best"], dev, test)
    metrics = {f"best_dev_{k}": v for k, v in record["dev_metrics"].items()} | {
        f"test_{k}": v for k, v in record["test_metrics"].items()
    }
    if model is not None:
        logged = run.log_model(result.model, metrics=metrics, key_metric="best_dev_f1", **model)
        if logged is not None:
            record["mlflow_model"] = logged
    run.log_results(
        params={f"best_{k}": v for k, v in record["best"].items()},
        files={"ner_metrics.json": record},
        metrics=None if model is not None else metrics,
    )
    run.describe(f"{what}: best dev entity F1 {100 * dev:.2f}, test F1 {100 * test:.2f}.")


def _outputs(result: NerResult, dev: pd.DataFrame, test: pd.DataFrame) -> tuple:
    """The model, its record and each split's table with its predicted tags."""
    return (
        result.model,
        result.record,
        dev.assign(predicted=pd.Series(list(result.dev_tags), index=dev.index, dtype=object)),
        test.assign(predicted=pd.Series(list(result.test_tags), index=test.index, dtype=object)),
    )


def finetune_ner_model(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    pretrained: dict,
    params: dict[str, Any],
) -> tuple[dict, dict, pd.DataFrame, pd.DataFrame]:
    """Fine-tunes BERT for NER: the best model, its record and the dev/test predictions."""
    from bert_pipeline.ner.finetune import finetune_ner

    config = ner_config(params, "finetune")
    tags = {"ner_mode": "finetune"}
    inputs = _inputs((train, dev, test))
    with task_run("ner_finetune", tags, config, inputs, pretrained=pretrained) as run:
        result = finetune_ner(
            train,
            dev,
            test,
            pretrained,
            config,
            source=_source(pretrained),
            mlflow_run_id=run.run_id,
        )
        result.record["mlflow_run_id"] = run.run_id
        model = {
            "example": pd.DataFrame({"text_a": dev["tokens"].head(2).map(" ".join)}),
            "name": "bert-ner",
            "registered_name": ner_params(params).registered_model_name,
            "max_seq_length": config.max_seq_length,
        }
        _report(result, run, f"NER fine-tuned from {_source(pretrained)}", model)
    return _outputs(result, dev, test)


def extract_ner_features(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    pretrained: dict,
    params: dict[str, Any],
) -> dict:
    """The frozen encoder's word features of all splits, computed once (the feature cache)."""
    from bert_pipeline.ner.finetune import feature_cache

    config = ner_config(params, "feature_based")
    tables = {"train": train, "dev": dev, "test": test}
    return feature_cache(tables, pretrained, config, source=_source(pretrained))


def train_ner_feature_tagger(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    cache: dict,
    params: dict[str, Any],
) -> tuple[dict, dict, pd.DataFrame, pd.DataFrame]:
    """Trains the BiLSTM tagger on the cached features, over the configured layer choices."""
    from bert_pipeline.ner.finetune import train_feature_tagger

    config = ner_config(params, "feature_based")
    tags = {"ner_mode": "feature_based"}
    with task_run("ner_feature_based", tags, config, _inputs((train, dev, test))) as run:
        result = train_feature_tagger(train, dev, test, cache, config, mlflow_run_id=run.run_id)
        result.record["mlflow_run_id"] = run.run_id
        result.record["encoder"] = cache["config"]["encoder"]
        _report(result, run, f"NER feature-based tagger on {result.record['encoder']}")
    return _outputs(result, dev, test)
