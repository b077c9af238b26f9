"""NER on CoNLL-2003, both ways of the paper, on the shared fine-tuning core.

`finetune_ner` trains all of BERT plus a token classifier; `feature_cache` runs the frozen
encoder once over every split and keeps each word's hidden states; `train_feature_tagger`
then trains only a BiLSTM tagger on that cache, over a (layer choice x lr x seed) grid. Both
pick the best trial and epoch on dev F1 and report dev and test entity P/R/F1. No Kedro here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from bert_pipeline.model import BertForTokenClassification, BertModel
from bert_pipeline.model.checkpoint import (
    check_checkpoint,
    encoder_only,
    model_from_checkpoint,
    model_to_checkpoint,
    tokenizer_from_checkpoint,
    with_new_head,
)
from bert_pipeline.ner.config import NerConfig, NerFeatureConfig
from bert_pipeline.ner.features import encode_split
from bert_pipeline.ner.metrics import entity_metrics
from bert_pipeline.ner.module import (
    FeatureNerModule,
    FeatureTagger,
    NerModule,
    WordFeatureExtractor,
    WordFeatures,
    choice_layers,
)
from bert_pipeline.training.config import TrialParams
from bert_pipeline.training.core import build_trainer, predict_batches
from bert_pipeline.training.finetune import (
    NOT_SAVED,
    FinetuneDataModule,
    GridResult,
    best_summary,
    run_grid,
    sequential_loader,
)


@dataclass
class NerResult:
    """The best tagger (a checkpoint value, or the feature tagger's state), its record and the
    predicted tags of every dev and test sentence."""

    model: dict
    record: dict[str, Any]
    dev_tags: list[list[str]]
    test_tags: list[list[str]]


def _finish(
    grid: GridResult, test_gold: list[list[str]], config: NerConfig, model: dict, **extra: Any
) -> NerResult:
    module = grid.module
    test_ids = grid.predict_test()
    test_tags = module.tags(test_ids, [len(s) for s in test_gold])
    record = {
        "dev_metrics": grid.dev_metrics["dev"],
        "test_metrics": entity_metrics(test_gold, test_tags),
        "best": best_summary(grid),
        "trials": grid.trials,
        **extra,
    }
    return NerResult(model, record, grid.module.best_predictions[0], test_tags)


def finetune_ner(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    checkpoint: Mapping,
    config: NerConfig,
    *,
    source: str = "checkpoint",
    mlflow_run_id: str | None = None,
) -> NerResult:
    """Fine-tunes BERT for token classification over the (lr x seed) grid."""
    tokenizer = tokenizer_from_checkpoint(checkpoint, source, config.lowercase)
    check_checkpoint(checkpoint, tokenizer, source, config.max_seq_length)
    encoded = [
        encode_split(tokenizer, f, config.label2id, config.max_seq_length, config.pack_sentences)
        for f in (train, dev, test)
    ]
    dev_gold = [list(t) for t in dev["tags"]]

    def build(trial: TrialParams) -> tuple[NerModule, FinetuneDataModule]:
        model = with_new_head(
            checkpoint,
            BertForTokenClassification,
            len(config.labels),
            source,
            trial.seed,
            head_lstm_size=config.head_lstm_size,
        )
        data = FinetuneDataModule(
            encoded[0],
            [encoded[1]],
            encoded[2],
            config.batch_size,
            config.eval_batch_size,
            trial.seed,
        )
        return NerModule(model, trial, ["dev"], [dev_gold], config.labels), data

    grid = run_grid("ner", config, build, mlflow_run_id=mlflow_run_id)
    out = model_to_checkpoint(
        grid.module.model,
        tokenizer,
        labels=config.labels,
        finetuning_task="ner",
    )
    windows = {s: len(e) for s, e in zip(("train", "dev", "test"), encoded, strict=True)}
    return _finish(grid, [list(t) for t in test["tags"]], config, out, windows=windows)


def feature_cache(
    tables: Mapping[str, pd.DataFrame],
    checkpoint: Mapping,
    config: NerFeatureConfig,
    *,
    source: str = "checkpoint",
) -> dict:
    """The frozen encoder's per-word hidden states of every split, for all configured layer
    choices: tensors {split: [words, K, H] float16}, config {"layers": the K hidden-state
    indices (0 = embeddings), the encoder and the windowing}."""
    tokenizer = tokenizer_from_checkpoint(checkpoint, source, config.lowercase)
    check_checkpoint(checkpoint, tokenizer, source, config.max_seq_length)
    encoder = model_from_checkpoint(encoder_only(checkpoint), BertModel, source=source)
    num_layers = encoder.config.num_hidden_layers
    layers = sorted({i for c in config.layer_choices for i in choice_layers(c, num_layers)})
    extractor, trainer = WordFeatureExtractor(encoder, layers), build_trainer(config)
    tensors = {}
    for split, frame in tables.items():
        encoded = encode_split(
            tokenizer, frame, config.label2id, config.max_seq_length, config.pack_sentences
        )
        loader = sequential_loader(encoded, config.eval_batch_size)
        tensors[split] = predict_batches(trainer, extractor, NOT_SAVED, dataloaders=loader)
    info = {
        "layers": layers,
        "num_layers": num_layers,
        "encoder": source,
        **_windowing(config),
        "words": {split: int(t.shape[0]) for split, t in tensors.items()},
    }
    return {"config": info, "tensors": tensors}


def _windowing(config: NerConfig) -> dict:
    """The settings that decide which words a feature was computed from."""
    return {
        "max_seq_length": config.max_seq_length,
        "pack_sentences": config.pack_sentences,
        "lowercase": config.lowercase,
    }


def _word_features(
    frame: pd.DataFrame, cache: Mapping, select: list[int], config: NerFeatureConfig
):
    split = str(frame["split"].iloc[0])
    labels = [config.label2id[t] for tags in frame["tags"] for t in tags]
    features = cache["tensors"][split]
    if features.shape[0] != len(labels):
        raise ValueError(
            f"the feature cache holds {features.shape[0]} words of split {split!r}, the table "
            f"{len(labels)}: it was made from other data; run extract_ner_features again"
        )
    return WordFeatures(features[:, select], [len(t) for t in frame["tokens"]], labels)


def train_feature_tagger(
    train: pd.DataFrame,
    dev: pd.DataFrame,
    test: pd.DataFrame,
    cache: Mapping[str, Any],
    config: NerFeatureConfig,
    *,
    mlflow_run_id: str | None = None,
) -> NerResult:
    """Trains the BiLSTM tagger on cached features over the (choice x lr x seed) grid."""
    stale = {
        k: (cache["config"].get(k), v)
        for k, v in _windowing(config).items()
        if cache["config"].get(k) != v
    }
    if stale:
        raise ValueError(
            "the feature cache was made with other settings "
            + ", ".join(f"{k}: {c} (now {v})" for k, (c, v) in stale.items())
            + ": run extract_ner_features again"
        )
    cached = list(cache["config"]["layers"])
    num_layers = int(cache["config"]["num_layers"])
    hidden = int(cache["tensors"]["train"].shape[-1])
    dev_gold = [list(t) for t in dev["tags"]]
    sets: dict[str, tuple] = {}

    def build(trial: TrialParams) -> tuple[FeatureNerModule, FinetuneDataModule]:
        choice = trial.tag
        wanted = choice_layers(choice, num_layers)
        missing = sorted(set(wanted) - set(cached))
        if missing:
            raise ValueError(
                f"the feature cache lacks layers {missing} for layer choice {choice!r}: run "
                "extract_ner_features again with that choice in layer_choices"
            )
        if choice not in sets:  # the selected layers, sliced once per choice
            select = [cached.index(i) for i in wanted]
            sets[choice] = tuple(
                _word_features(f, cache, select, config) for f in (train, dev, test)
            )
        with torch.random.fork_rng():  # the init depends on the seed, not on earlier trials
            torch.manual_seed(trial.seed)
            model = FeatureTagger(
                choice, len(wanted), hidden, config.lstm_width, len(config.labels), config.dropout
            )
        data = FinetuneDataModule(
            sets[choice][0],
            [sets[choice][1]],
            sets[choice][2],
            config.batch_size,
            config.eval_batch_size,
            trial.seed,
        )
        module = FeatureNerModule(model, trial, ["dev"], [dev_gold], config.labels)
        return module, data

    grid = run_grid(
        "ner_features", config, build, tags=config.layer_choices, mlflow_run_id=mlflow_run_id
    )
    choice = grid.best["tag"]
    state = {
        "config": {
            "choice": choice,
            "layers": choice_layers(choice, num_layers),
            "hidden": hidden,
            "width": config.lstm_width,
            "labels": config.labels,
            "dropout": config.dropout,
        },
        "tensors": {k: v.detach().clone() for k, v in grid.module.model.state_dict().items()},
    }
    by_choice = {
        c: max(t["best_score"] for t in grid.trials if t["tag"] == c) for c in config.layer_choices
    }
    return _finish(grid, [list(t) for t in test["tags"]], config, state, dev_f1_by_choice=by_choice)


def tagger_from_state(state: Mapping[str, Any]) -> FeatureTagger:
    """The trained feature tagger of `train_feature_tagger` (its `model`), in eval mode."""
    c = state["config"]
    model = FeatureTagger(
        c["choice"], len(c["layers"]), c["hidden"], c["width"], len(c["labels"]), c["dropout"]
    )
    model.load_state_dict(state["tensors"])
    return model.eval()
