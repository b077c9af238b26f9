"""WordPiece alignment and packing, both taggers on the shared core, the feature cache."""

from __future__ import annotations

import random

import pytest
import torch

from bert_pipeline.model import BertForTokenClassification, BertModel, hidden_states
from bert_pipeline.model.bert import IGNORE_INDEX as IGNORE
from bert_pipeline.model.checkpoint import (
    encoder_only,
    model_from_checkpoint,
    tokenizer_from_checkpoint,
)
from bert_pipeline.ner.config import CONLL_LABELS, NerConfig, NerFeatureConfig
from bert_pipeline.ner.conll import parse_conll
from bert_pipeline.ner.features import build_windows, encode_split
from bert_pipeline.ner.finetune import (
    feature_cache,
    finetune_ner,
    tagger_from_state,
    train_feature_tagger,
)
from bert_pipeline.ner.module import WordFeatures, choice_layers
from tests.glue.helpers import tiny_checkpoint
from tests.ner.helpers import conll_text, sentence

LABEL2ID = {t: i for i, t in enumerate(CONLL_LABELS)}


@pytest.fixture(scope="module")
def checkpoint():
    rng = random.Random(1)
    texts = [" ".join(w for w, _ in sentence(rng)) for _ in range(300)]
    return tiny_checkpoint(texts)


@pytest.fixture(scope="module")
def tables():
    sizes = {"train": 60, "dev": 15, "test": 15}
    return {
        s: parse_conll(conll_text(n, s).splitlines(), s, CONLL_LABELS, "IOB2", s)
        for s, n in sizes.items()
    }


@pytest.mark.parametrize("pack", [True, False])
def test_labels_on_first_sub_tokens_and_words_in_order(checkpoint, tables, pack):
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    frame = tables["dev"].copy()
    long = ["Supercalifragilistic"] * 40  # one sentence longer than a window
    frame.loc[len(frame)] = ["dev", 99, len(frame), long, ["B-MISC"] + ["I-MISC"] * 39]
    windows = build_windows(tokenizer, frame, LABEL2ID, 24, pack)
    assert all(len(w.input_ids) <= 24 for w in windows)
    labels = [lab for w in windows for lab, f in zip(w.labels, w.first, strict=True) if f]
    gold = [LABEL2ID[t] for tags in frame["tags"] for t in tags]
    assert labels == gold  # every word once, in order, label on its first piece
    for w in windows:
        assert w.input_ids[0] == tokenizer.token_to_id("[CLS]")
        assert w.input_ids[-1] == tokenizer.token_to_id("[SEP]")
        assert all((lab != IGNORE) == f for lab, f in zip(w.labels, w.first, strict=True))
    short = build_windows(tokenizer, tables["dev"], LABEL2ID, 24, pack)
    if pack:  # several sentences of a document share a window
        assert len(short) < len(tables["dev"])
    else:
        assert len(short) == len(tables["dev"])
    assert len(windows) > len(short) + 1  # the long sentence takes several windows


def _config(schema=NerConfig, **extra):
    values = dict(learning_rates=[1e-3], seeds=[3], batch_size=4, epochs=2, max_seq_length=48)
    return schema(progress_bar=False, **{**values, **extra})


def test_finetuning_is_deterministic_and_the_saved_model_predicts_the_kept_tags(checkpoint, tables):
    t = tables
    result = finetune_ner(t["train"], t["dev"], t["test"], checkpoint, _config())
    again = finetune_ner(t["train"], t["dev"], t["test"], checkpoint, _config())
    assert result.record["dev_metrics"] == again.record["dev_metrics"]
    assert result.dev_tags == again.dev_tags
    assert set(result.record["test_metrics"]) == {"precision", "recall", "f1", "f1_strict"}
    assert len(result.test_tags) == 15
    assert [len(s) for s in result.dev_tags] == [len(s) for s in t["dev"]["tokens"]]
    model = model_from_checkpoint(result.model, BertForTokenClassification)
    assert model.config.to_dict()["vocab_size"] == checkpoint["config"]["vocab_size"]
    assert result.model["config"]["id2label"]["1"] == "B-PER"
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    features = encode_split(tokenizer, t["dev"], LABEL2ID, 48, pack=False)
    batch = features.collate(list(features))
    with torch.no_grad():
        _, logits = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    flat = [CONLL_LABELS[i] for i in logits.argmax(-1)[batch["first"]].tolist()]
    assert flat == [tag for s in result.dev_tags for tag in s]


def test_feature_based_cache_choices_and_tagger(checkpoint, tables):
    t = tables
    config = _config(
        NerFeatureConfig,
        layer_choices=["last", "weighted_sum_all", "concat_last_four"],
        lstm_width=8,
    )
    cache = feature_cache(t, checkpoint, config)
    assert cache["config"]["layers"] == [0, 1, 2]  # 2-layer model: all hidden states
    words = int(t["train"]["tokens"].map(len).sum())
    assert tuple(cache["tensors"]["train"].shape) == (words, 3, 128)
    assert cache["tensors"]["train"].dtype == torch.float16
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    first = encode_split(tokenizer, t["train"].head(1), LABEL2ID, 48, pack=False)
    batch = first.collate(list(first))
    encoder = model_from_checkpoint(encoder_only(checkpoint), BertModel).eval()
    with torch.no_grad():
        states = hidden_states(
            encoder, batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
    expected = torch.stack(states, dim=2)[batch["first"]].half()  # every word's first piece
    assert torch.equal(cache["tensors"]["train"][: len(expected)], expected)
    result = train_feature_tagger(t["train"], t["dev"], t["test"], cache, config)
    assert [r["tag"] for r in result.record["trials"]] == config.layer_choices
    assert set(result.record["dev_f1_by_choice"]) == set(config.layer_choices)
    assert result.record["best"]["tag"] in config.layer_choices
    tagger = tagger_from_state(result.model)  # the saved tagger reproduces the dev tags
    choice = result.model["config"]["choice"]
    select = [cache["config"]["layers"].index(i) for i in choice_layers(choice, 2)]
    lengths = [len(s) for s in t["dev"]["tokens"]]
    labels = [LABEL2ID[x] for s in t["dev"]["tags"] for x in s]
    data = WordFeatures(cache["tensors"]["dev"][:, select], lengths, labels)
    batch = data.collate(list(data))
    with torch.no_grad():
        ids = tagger(batch["features"], batch["lengths"]).argmax(-1)[batch["first"]]
    assert [CONLL_LABELS[i] for i in ids.tolist()] == [x for s in result.dev_tags for x in s]


def test_a_stale_feature_cache_is_refused(checkpoint, tables):
    t = tables
    config = _config(NerFeatureConfig, layer_choices=["last"], lstm_width=8)
    cache = feature_cache(
        {"train": t["train"].head(10), "dev": t["dev"], "test": t["test"]}, checkpoint, config
    )
    with pytest.raises(ValueError, match="holds .* words of split 'train'.*extract_ner_features"):
        train_feature_tagger(t["train"], t["dev"], t["test"], cache, config)
    wider = _config(NerFeatureConfig, layer_choices=["embeddings"], lstm_width=8)
    with pytest.raises(ValueError, match=r"lacks layers \[0\] for layer choice 'embeddings'"):
        train_feature_tagger(t["train"], t["dev"], t["test"], cache, wider)
    longer = _config(NerFeatureConfig, layer_choices=["last"], lstm_width=8, max_seq_length=64)
    with pytest.raises(ValueError, match=r"other settings max_seq_length: 48 \(now 64\)"):
        train_feature_tagger(t["train"], t["dev"], t["test"], cache, longer)


def test_a_feature_trial_depends_on_its_seed_alone(checkpoint, tables):
    """The tagger's init is drawn from the trial's seed, whatever ran in the process before
    (so `--from-nodes train_ner_feature_tagger` reproduces a full run)."""
    t = tables
    config = _config(NerFeatureConfig, layer_choices=["last"], lstm_width=8, epochs=1)
    cache = feature_cache(t, checkpoint, config)
    first = train_feature_tagger(t["train"], t["dev"], t["test"], cache, config)
    torch.rand(1000)  # the global RNG moves on, as after extract_ner_features or other trials
    second = train_feature_tagger(t["train"], t["dev"], t["test"], cache, config)
    for key, value in first.model["tensors"].items():
        assert torch.equal(value, second.model["tensors"][key]), key


def test_bad_parameters_are_named():
    from bert_pipeline.training.config import ConfigError

    with pytest.raises(ConfigError, match=r"finetune_ner.feature_based.layer_choices"):
        NerFeatureConfig.from_params({"layer_choices": ["top"]}, "finetune_ner.feature_based")
    with pytest.raises(ConfigError, match=r"finetune_ner.finetune.labels"):
        NerConfig.from_params({"labels": ["B-PER", "I-PER"]}, "finetune_ner.finetune")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        # a key of the other tagger's section is unknown, not silently ignored
        ({"finetune": {"lstm_width": 8}}, r"finetune_ner.finetune.lstm_width: Key 'lstm_width'"),
        ({"feature_based": {"layer_choise": ["last"]}}, r"finetune_ner.feature_based.layer_cho"),
        # labels are set once, for both taggers
        ({"finetune": {"labels": ["O"]}}, r"finetune_ner.finetune.labels=\['O'\] is not a sec"),
        ({"labels": ["B-PER"]}, r"finetune_ner.labels=\['B-PER'\] must be distinct and hold"),
        ({"data": {"max_train_sentences": "many"}}, r"finetune_ner.data.max_train_sentences"),
        ({"fine_tune": {}}, r"finetune_ner.fine_tune: Key 'fine_tune'"),
    ],
)
def test_ner_parameters_refuse_unknown_and_misplaced_keys(params, message):
    from bert_pipeline.ner.config import ner_config
    from bert_pipeline.training.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        ner_config({"labels": CONLL_LABELS, **params}, "finetune")


def test_ner_config_reads_each_section_with_the_shared_labels():
    from bert_pipeline.ner.config import ner_config

    params = {"labels": CONLL_LABELS, "finetune": {"epochs": 4}, "feature_based": {"lstm_width": 8}}
    finetune, features = ner_config(params, "finetune"), ner_config(params, "feature_based")
    assert type(finetune) is NerConfig and finetune.epochs == 4
    assert type(features) is NerFeatureConfig and features.lstm_width == 8
    assert finetune.labels == features.labels == CONLL_LABELS
