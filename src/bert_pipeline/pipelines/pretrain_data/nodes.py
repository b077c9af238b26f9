"""Thin Kedro nodes over `bert_pipeline.data`; all data moves through the catalog.

The corpus-sized stages return lazy Dask collections; the catalog datasets compute them
partition by partition on the Dask client that `bert_pipeline.hooks.DaskClusterHooks` opens for
nodes tagged `dask`.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from dask.typing import DaskCollection
from tokenizers import Tokenizer

from bert_pipeline.data.examples import ExampleConfig
from bert_pipeline.data.shards import RERUN, ExampleShards
from bert_pipeline.data.tokenizer import TokenizerParams
from bert_pipeline.params import parse_params

logger = logging.getLogger(__name__)


def ingest_corpus(corpus: DaskCollection) -> DaskCollection:
    """Snapshot of the raw corpus as the documents table (doc_id, source, text, layout).

    The catalog validates and stores it, so later stages never re-read the source (which may be
    a streamed hub dataset) and a rerun from `split_sentences` sees the same documents.
    """
    logger.info("ingesting the corpus in %d partition(s)", corpus.npartitions)
    return corpus


def split_sentences(documents: DaskCollection, language: str) -> tuple[DaskCollection, list[str]]:
    """Sentences table (doc_id, sentence_index, text), indexed by document number, and the
    warnings about the corpus found while counting its documents (binary-looking files), which
    the statistics report repeats."""
    from bert_pipeline.data.stages import sentences_frame

    return sentences_frame(documents, language)


def build_tokenizer(sentences: DaskCollection, params: dict[str, Any]) -> Tokenizer:
    """Loads `vocab_file` when given (e.g. bert-base-uncased's vocab.txt), else trains WordPiece
    on a seeded sample of `sample_size` sentences."""
    from bert_pipeline.data.stages import sample_sentences
    from bert_pipeline.data.tokenizer import tokenizer_from_vocab, train_tokenizer

    cfg = tokenizer_config(params)
    if cfg.vocab_file:
        return tokenizer_from_vocab(cfg.vocab_file, lowercase=cfg.lowercase)
    texts = sample_sentences(sentences, cfg.sample_size, cfg.seed)
    logger.info("training WordPiece on %d sampled sentences", len(texts))
    return train_tokenizer(
        texts,
        vocab_size=cfg.vocab_size,
        lowercase=cfg.lowercase,
        min_frequency=cfg.min_frequency,
        limit_alphabet=cfg.limit_alphabet,
    )


def tokenizer_config(params: dict[str, Any]) -> TokenizerParams:
    return parse_params(TokenizerParams, params, "pretrain_data.tokenizer")


def example_config(params: dict[str, Any]) -> ExampleConfig:
    return parse_params(ExampleConfig, params, "pretrain_data.examples")


def create_examples(
    sentences: DaskCollection, tokenizer: Tokenizer, params: dict[str, Any]
) -> ExampleShards:
    """Lazy example shards, stamped with the tokenizer and parameters that make them."""
    from bert_pipeline.data.shards import tokenizer_fingerprint
    from bert_pipeline.data.stages import example_shards, shard_statistics

    cfg = example_config(params)
    parts = example_shards(sentences, tokenizer, cfg, cfg.documents_per_shard)
    logger.info(
        "creating examples in %d shard(s) of ~%d documents", len(parts), cfg.documents_per_shard
    )
    manifest = {
        "tokenizer_sha256": tokenizer_fingerprint(tokenizer),
        "parameters": dataclasses.asdict(cfg),
    }
    statistics = shard_statistics(parts, cfg, tokenizer)
    return ExampleShards(parts=parts, manifest=manifest, statistics=statistics)


def summarize_examples(
    examples: ExampleShards,
    tokenizer: Tokenizer,
    corpus_warnings: list[str],
    params: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, float]]:
    """The statistics report (per shard, merged) and its summary figures; its warnings (heavy
    truncation, binary-looking input) are logged one line each and counted in the report. The
    report names the examples' generation, so no reader pairs it with other examples."""
    from bert_pipeline.data.stats import merge_statistics, summary

    examples.check_tokenizer(tokenizer)
    if len(examples.statistics) != len(examples.parts):
        raise ValueError(
            "pretraining_examples/manifest.json has no statistics per shard: written by an older "
            f"version; rebuild the examples with {RERUN}"
        )
    cfg = example_config(params)
    stats = merge_statistics(examples.statistics, cfg)
    stats["examples_generation"] = examples.manifest["generation"]
    stats["parameters"] = examples.manifest["parameters"]
    stats["warnings"] += corpus_warnings
    stats["n_warnings"] = len(stats["warnings"])
    for line in stats["warnings"]:
        logger.warning(line)
    masks = (  # dynamic masking draws them in training: there is no rate to report here
        f"selected {stats['selected_rate']:.4f}"
        if "selected_rate" in stats
        else "masks drawn in training"
    )
    logger.info(
        "%d examples from %d documents in %d shard(s) (%s, IsNext %.4f)",
        stats["n_examples"],
        stats["n_documents"],
        stats["n_shards"],
        masks,
        stats["is_next_rate"],
    )
    return stats, summary(stats)
