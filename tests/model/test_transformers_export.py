"""Our exports as transformers reads them: AutoTokenizer, pipelines and the model card's header."""

from __future__ import annotations

import random

import pytest
import torch
import yaml

from bert_pipeline.data.tokenizer import train_tokenizer
from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.model.card import glue_card, pretrained_card
from bert_pipeline.model.checkpoint import save_pretrained
from tests.glue.helpers import sentence

POSITIONS = 64


def _tokenizer(lowercase: bool):
    rng = random.Random(0)
    texts = [sentence(rng) for _ in range(200)]
    return train_tokenizer(
        texts + [t.title() for t in texts], vocab_size=300, min_frequency=1, lowercase=lowercase
    )


def _pretrained(tmp_path, lowercase: bool):
    tokenizer = _tokenizer(lowercase)
    torch.manual_seed(0)
    config = BertConfig.from_preset(
        "tiny", vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=POSITIONS
    )
    model = BertForPreTraining(config).eval()
    return model, tokenizer, save_pretrained(model, tmp_path / "export", tokenizer)


@pytest.mark.parametrize("lowercase", [True, False])
def test_auto_tokenizer_truncates_to_the_positions_and_keeps_the_casing(tmp_path, lowercase):
    """Without tokenizer_config.json transformers allowed 1e30 tokens and lowercased any model."""
    transformers = pytest.importorskip("transformers")
    _, tokenizer, folder = _pretrained(tmp_path, lowercase)
    hf = transformers.AutoTokenizer.from_pretrained(folder)
    assert hf.model_max_length == POSITIONS
    long_text = "The Cat Watches The Lantern. " * 100
    assert len(hf(long_text, truncation=True)["input_ids"]) == POSITIONS
    short = "The Cat Watches The Lantern."
    assert hf(short)["input_ids"] == tokenizer.encode(short).ids
    assert hf.convert_ids_to_tokens(hf(short)["input_ids"])[1] == ("the" if lowercase else "The")
    assert (hf.mask_token, hf.pad_token_id) == ("[MASK]", 0)


def test_fill_mask_pipeline_predicts_what_our_model_predicts(tmp_path):
    transformers = pytest.importorskip("transformers")
    model, tokenizer, folder = _pretrained(tmp_path, lowercase=False)
    fill = transformers.pipeline("fill-mask", model=str(folder), top_k=3)
    text = "The Cat [MASK] The Lantern."
    predictions = fill(text)
    ids = tokenizer.encode(text).ids
    with torch.no_grad():
        logits = model(torch.tensor([ids])).prediction_logits[0, ids.index(4)]
    expected = logits.softmax(-1).topk(3)
    assert [p["token"] for p in predictions] == expected.indices.tolist()
    assert [p["score"] for p in predictions] == pytest.approx(expected.values.tolist(), abs=1e-5)
    assert [p["token_str"] for p in predictions] == [
        tokenizer.decode([i]) for i in expected.indices.tolist()
    ]


def _header(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_cards_carry_a_hub_metadata_header():
    config = BertConfig.from_preset("tiny", vocab_size=100).to_dict()
    statistics = {"n_examples": 10, "n_documents": 2, "n_tokens": 500, "mean_length": 50.0}
    statistics |= {"is_next_rate": 1.0}
    metrics = {"global_step": 5, "num_train_examples": 8, "val/mlm_accuracy": 0.5}
    metrics |= {"val/mlm_loss": 2.0}
    card = pretrained_card(config, statistics, metrics, {})
    meta = _header(card)
    assert meta["pipeline_tag"] == "fill-mask" and meta["language"] == ["en"]
    assert {"license", "tags", "metrics"} <= set(meta) and "bert" in meta["tags"]
    assert "\n# BERT pretrained with bert_pipeline\n" in card

    best = {"learning_rate": 1e-3, "seed": 1, "best_epoch": 0}
    record = {"best": best, "trials": [best], "train_examples": 10, "dev_examples": 4}
    record["dev_metrics"] = {"dev": {"matthews_corr": 0.5}}
    meta = _header(glue_card(config, "cola", record, "data/06_models/bert_pretrained"))
    assert meta["pipeline_tag"] == "text-classification"
    assert meta["datasets"] == ["nyu-mll/glue"] and meta["metrics"] == ["matthews_correlation"]
    assert "base_model" not in meta  # a local folder is no hub model
    hub = _header(glue_card(config, "cola", record, "google-bert/bert-base-uncased"))
    assert hub["base_model"] == "google-bert/bert-base-uncased"
    mean = BertConfig.from_preset("tiny", vocab_size=100, classifier_pooling="mean").to_dict()
    assert "library_name" not in _header(glue_card(mean, "cola", record, "a folder"))
