"""Thin Kedro nodes over `bert_pipeline.data`; all data moves through the catalog."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
import pyarrow as pa
from tokenizers import Tokenizer

from bert_pipeline.data.corpus import split_documents
from bert_pipeline.data.examples import (
    ExampleConfig,
    build_corpus,
    tokenize_sentences,
    vocab_from_tokenizer,
)
from bert_pipeline.data.examples import (
    create_examples as build_examples,
)
from bert_pipeline.data.stats import example_statistics, mlflow_metrics
from bert_pipeline.data.tokenizer import tokenizer_from_vocab, train_tokenizer
from bert_pipeline.schemas.pretraining import check_examples_against_parameters

logger = logging.getLogger(__name__)

_EXAMPLE_KEYS = (
    "max_seq_length",
    "short_seq_prob",
    "masked_lm_prob",
    "max_predictions_per_seq",
    "dupe_factor",
    "whole_word_mask",
    "seed",
)


def ingest_corpus(corpus: pd.DataFrame) -> pd.DataFrame:
    """Snapshot of the raw corpus as the documents table (doc_id, source, text, layout).

    The catalog validates and stores it, so later stages never re-read the source (which may be
    a streamed hub dataset) and a rerun from `split_sentences` sees the same documents.
    """
    logger.info("ingested %d documents from %d source(s)", len(corpus), corpus["source"].nunique())
    return corpus


def split_sentences(documents: pd.DataFrame, language: str) -> pd.DataFrame:
    """Sentences table (doc_id, sentence_index, text), documents kept apart and in order."""
    sentences = split_documents(documents, language=language)
    logger.info("split %d documents into %d sentences", len(documents), len(sentences))
    return sentences


def build_tokenizer(sentences: pd.DataFrame, params: dict[str, Any]) -> Tokenizer:
    """Loads `vocab_file` when given (e.g. bert-base-uncased's vocab.txt), else trains WordPiece."""
    if params.get("vocab_file"):
        return tokenizer_from_vocab(params["vocab_file"], lowercase=params.get("lowercase", True))
    texts = sentences["text"].tolist()
    return train_tokenizer(
        texts,
        vocab_size=int(params["vocab_size"]),
        lowercase=bool(params.get("lowercase", True)),
        min_frequency=int(params.get("min_frequency", 2)),
        length=len(texts),
    )


def example_config(params: dict[str, Any]) -> ExampleConfig:
    masking = params.get("masking", "static")
    if masking not in ("static", "dynamic"):
        raise ValueError(
            f"parameter pretrain_data.examples.masking={masking!r}; use static|dynamic"
        )
    unknown = set(params) - set(_EXAMPLE_KEYS) - {"masking", "num_proc", "shard_size"}
    if unknown:
        raise ValueError(f"unknown parameter(s) pretrain_data.examples.{sorted(unknown)}")
    return ExampleConfig(
        **{k: params[k] for k in _EXAMPLE_KEYS if k in params},
        dynamic_masking=masking == "dynamic",
    )


def create_examples(
    sentences: pd.DataFrame, tokenizer: Tokenizer, params: dict[str, Any]
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], dict[str, dict[str, float]]]:
    """Sharded examples (Parquet partitions), the statistics report and its MLflow metrics."""
    cfg = example_config(params)
    cfg.check()
    vocab = vocab_from_tokenizer(tokenizer)
    token_lists = tokenize_sentences(tokenizer, sentences["text"].tolist())
    corpus = build_corpus(
        sentences["doc_id"].tolist(), sentences["sentence_index"].to_numpy(), token_lists
    )
    table = build_examples(corpus, cfg, vocab, num_proc=int(params.get("num_proc", 1)))
    check_examples_against_parameters(table, cfg.max_seq_length, vocab.size)
    stats = example_statistics(table, cfg, vocab)
    stats["parameters"] = {**cfg.__dict__, "num_proc": int(params.get("num_proc", 1))}
    logger.info(
        "created %d examples from %d documents (selected %.4f, IsNext %.4f)",
        stats["n_examples"],
        corpus.n_docs,
        stats.get("selected_rate", float("nan")),
        stats["is_next_rate"],
    )
    return _shards(table, int(params.get("shard_size", 100_000))), stats, mlflow_metrics(stats)


def _shards(table: pa.Table, shard_size: int) -> dict[str, pd.DataFrame]:
    if shard_size < 1:
        raise ValueError(f"parameter pretrain_data.examples.shard_size={shard_size} must be >= 1")
    return {
        f"part-{i // shard_size:05d}": table.slice(i, shard_size).to_pandas()
        for i in range(0, table.num_rows, shard_size)
    }
