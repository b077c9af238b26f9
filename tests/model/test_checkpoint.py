"""Checkpoint folders: round trips, HF naming variants, errors, and the Kedro dataset."""

from __future__ import annotations

import logging
import pickle

import pytest
import torch
from safetensors.torch import load_file, save_file

from bert_pipeline.io.checkpoint_dataset import CheckpointDataset
from bert_pipeline.model import (
    BertConfig,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
)
from bert_pipeline.model.card import glue_card, pretrained_card
from bert_pipeline.model.checkpoint import (
    load_pretrained,
    model_from_checkpoint,
    model_to_checkpoint,
    random_like,
    read_checkpoint,
    save_pretrained,
    write_checkpoint,
)

CFG = BertConfig.from_preset("tiny", vocab_size=97, max_position_embeddings=64)
IDS = torch.tensor([[2, 10, 11, 12, 3, 20, 21, 3], [2, 13, 14, 3, 22, 3, 0, 0]])
TT = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 0, 0]])
AM = (IDS != 0).long()


def outputs(model):
    model.eval()
    with torch.no_grad():
        if isinstance(model, BertForPreTraining):
            out = model(IDS, TT, AM)
            return out.prediction_logits, out.seq_relationship_logits
        if isinstance(model, BertForSequenceClassification):
            return model(IDS, TT, AM)[1:]
        return model(IDS, TT, AM)


@pytest.mark.parametrize(
    "make",
    [
        lambda: BertForPreTraining(CFG),
        lambda: BertModel(CFG),
        lambda: BertForSequenceClassification(CFG, num_labels=3),
    ],
    ids=["pretraining", "bert", "classification"],
)
def test_save_load_round_trip(tmp_path, make):
    torch.manual_seed(0)
    model = make()
    save_pretrained(model, tmp_path / "ckpt")
    loaded, info = load_pretrained(tmp_path / "ckpt", type(model), output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    for a, b in zip(outputs(model), outputs(loaded), strict=True):
        assert torch.equal(a, b)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "config.json",
        "model.safetensors",
    ]


def test_tied_decoder_not_written_and_retied(tmp_path):
    save_pretrained(BertForPreTraining(CFG), tmp_path / "ckpt")
    keys = set(load_file(tmp_path / "ckpt" / "model.safetensors"))
    assert "cls.predictions.decoder.weight" not in keys and "cls.predictions.bias" in keys
    model = load_pretrained(tmp_path / "ckpt")
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


def test_tokenizer_files_and_overwrite(tmp_path):
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    (tok / "unrelated.txt").write_text("x")
    save_pretrained(BertModel(CFG), tmp_path / "ckpt", tokenizer=tok)
    assert read_checkpoint(tmp_path / "ckpt")["tokenizer_files"] == {"vocab.txt": b"[PAD]\n[UNK]\n"}
    save_pretrained(BertModel(CFG), tmp_path / "ckpt")  # replaces the whole folder
    assert not (tmp_path / "ckpt" / "vocab.txt").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    (tmp_path / "ckpt" / "notes.md").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.md"):
        save_pretrained(BertModel(CFG), tmp_path / "ckpt")


def test_model_card_travels_as_readme(tmp_path):
    checkpoint = model_to_checkpoint(BertModel(CFG)) | {"model_card": "# a card\n"}
    write_checkpoint(checkpoint, tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "README.md").read_text() == "# a card\n"
    assert read_checkpoint(tmp_path / "ckpt")["model_card"] == "# a card\n"
    write_checkpoint(model_to_checkpoint(BertModel(CFG)), tmp_path / "ckpt")  # a card is ours
    assert "model_card" not in read_checkpoint(tmp_path / "ckpt")


def test_bert_only_checkpoint_into_pretraining_reports_fresh_heads(tmp_path, caplog):
    torch.manual_seed(0)
    encoder = BertModel(CFG)
    save_pretrained(encoder, tmp_path / "ckpt")  # keys without the "bert." prefix
    with caplog.at_level(logging.WARNING):
        model, info = load_pretrained(tmp_path / "ckpt", output_loading_info=True)
    assert sorted(info.missing_keys) == sorted(
        [
            "cls.predictions.bias",
            "cls.predictions.transform.dense.weight",
            "cls.predictions.transform.dense.bias",
            "cls.predictions.transform.LayerNorm.weight",
            "cls.predictions.transform.LayerNorm.bias",
            "cls.seq_relationship.weight",
            "cls.seq_relationship.bias",
        ]
    )
    assert "freshly initialised" in caplog.text
    with torch.no_grad():
        torch.testing.assert_close(model.bert(IDS, TT, AM)[0], encoder.eval()(IDS, TT, AM)[0])


def test_pretraining_checkpoint_into_bert_model_reports_unused_heads(tmp_path):
    save_pretrained(BertForPreTraining(CFG), tmp_path / "ckpt")
    model, info = load_pretrained(tmp_path / "ckpt", BertModel, output_loading_info=True)
    assert info.missing_keys == []
    assert "cls.seq_relationship.weight" in info.unexpected_keys


def test_tf_names_and_pytorch_bin(tmp_path):
    torch.manual_seed(0)
    model = BertForPreTraining(CFG)
    save_pretrained(model, tmp_path / "ckpt")
    state = load_file(tmp_path / "ckpt" / "model.safetensors")
    renamed = {
        k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ): v
        for k, v in state.items()
    }
    renamed["bert.embeddings.position_ids"] = torch.arange(64)[None]
    renamed["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    (tmp_path / "ckpt" / "model.safetensors").unlink()
    torch.save(renamed, tmp_path / "ckpt" / "pytorch_model.bin")
    loaded, info = load_pretrained(tmp_path / "ckpt", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    assert "bert.embeddings.LayerNorm.gamma" in info.renamed_keys
    for a, b in zip(outputs(model), outputs(loaded), strict=True):
        assert torch.equal(a, b)


def test_shape_mismatch_names_key_and_shapes(tmp_path):
    save_pretrained(BertModel(CFG), tmp_path / "ckpt")
    state = load_file(tmp_path / "ckpt" / "model.safetensors")
    state["pooler.dense.bias"] = torch.zeros(5)
    save_file(state, tmp_path / "ckpt" / "model.safetensors")
    with pytest.raises(ValueError, match=r"pooler\.dense\.bias.*\(5,\).*\(128,\)"):
        load_pretrained(tmp_path / "ckpt", BertModel)


def test_missing_files_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_pretrained(tmp_path)


def test_config_overrides_and_num_labels_from_config(tmp_path):
    save_pretrained(BertForSequenceClassification(CFG, num_labels=3), tmp_path / "ckpt")
    model = load_pretrained(
        tmp_path / "ckpt", BertForSequenceClassification, hidden_dropout_prob=0.0
    )
    assert model.num_labels == 3 and model.config.hidden_dropout_prob == 0.0
    with pytest.raises(TypeError, match="hidden_dropout"):
        load_pretrained(tmp_path / "ckpt", BertForSequenceClassification, hidden_dropout=0.0)
    with pytest.raises(ValueError, match=r"classifier\.\w+.*\(3,.*\(5,"):
        load_pretrained(tmp_path / "ckpt", BertForSequenceClassification, num_labels=5)


def test_checkpoint_dataset_round_trip(tmp_path):
    torch.manual_seed(0)
    model = BertForSequenceClassification(CFG, num_labels=2)
    value = model_to_checkpoint(model, {"vocab.txt": b"[PAD]\n"})
    value = pickle.loads(pickle.dumps(value))  # plain, picklable value
    dataset = CheckpointDataset(path=str(tmp_path / "models" / "ckpt"))
    assert not dataset.exists()
    dataset.save(value)
    assert dataset.exists()
    loaded = dataset.load()
    assert loaded["tokenizer_files"] == {"vocab.txt": b"[PAD]\n"}
    assert loaded["config"]["architectures"] == ["BertForSequenceClassification"]
    rebuilt = model_from_checkpoint(loaded, BertForSequenceClassification)
    for a, b in zip(outputs(model), outputs(rebuilt), strict=True):
        assert torch.equal(a, b)
    assert "ckpt" in str(dataset)


def test_checkpoint_dataset_rejects_other_values(tmp_path):
    from kedro.io.core import DatasetError

    with pytest.raises(DatasetError, match="state_dict"):
        CheckpointDataset(path=str(tmp_path / "ckpt")).save({"config": {}})


def test_pretrained_card_says_how_the_model_was_trained():
    """The card states the pretraining precision and dropout: config.json keeps the fine-tuning
    dropout, so a model pretrained without dropout would otherwise not say so."""
    config = BertConfig.from_preset("tiny", vocab_size=100).to_dict()
    statistics = {"n_examples": 10, "n_documents": 2, "n_tokens": 500, "mean_length": 50.0}
    statistics |= {"is_next_rate": 1.0}
    metrics = {"global_step": 5, "num_train_examples": 8, "val/mlm_accuracy": 0.5}
    metrics |= {"val/mlm_loss": 2.0}
    fast = {"precision": "bf16-mixed", "compile": True, "dropout": 0.0}
    card = pretrained_card(config, statistics, metrics, fast)
    assert (
        "- Precision bf16-mixed, torch.compile; dropout 0.0 while pretraining (config.json " in card
    )
    assert "- Precision 32; dropout 0.1." in pretrained_card(config, statistics, metrics, {})
    assert "by whole word" not in card
    statistics |= {"masking": "dynamic"}
    statistics |= {"parameters": {"whole_word_mask": True, "masked_lm_prob": 0.15}}
    card = pretrained_card(config, statistics, metrics, {})
    assert "- Masking: dynamic, by whole word, 0.15 of the tokens" in card


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_glue_card_says_what_the_classifier_reads(pooling):
    """transformers' classifier reads [CLS]: a mean-pooled model's card must not send users
    there."""
    config = BertConfig.from_preset("tiny", vocab_size=100, classifier_pooling=pooling).to_dict()
    best = {"learning_rate": 1e-3, "seed": 1, "best_epoch": 0}
    record = {"best": best, "dev_metrics": {"dev": {"pearson": 0.5}}, "trials": [best]}
    record |= {"train_examples": 10, "dev_examples": 4}
    card = glue_card(config, "stsb", record, "a folder")
    assert ("reads the pooled [CLS]" in card) == (pooling == "cls")
    assert ("transformers.BertForSequenceClassification" in card) == (pooling == "cls")
    assert 'load_pretrained("<this folder>", BertForSequenceClassification)' in card
    assert "Best of 1 trial(s) on dev: lr 0.001, seed 1, epoch 1." in card


def test_a_random_init_like_a_checkpoint_has_its_architecture_and_vocabulary_only():
    """finetune_glue's random_init_seed baseline: fresh weights from the seed alone."""
    torch.manual_seed(5)
    trained = model_to_checkpoint(BertForPreTraining(CFG), {"vocab.txt": b"[PAD]\n[UNK]\n"})
    state = torch.random.get_rng_state()
    first, again, other = random_like(trained, 0), random_like(trained, 0), random_like(trained, 1)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's draws are untouched
    assert first["config"] == trained["config"]
    assert first["tokenizer_files"] == trained["tokenizer_files"]
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert torch.equal(first["state_dict"][key], again["state_dict"][key])
    assert not torch.equal(first["state_dict"][key], other["state_dict"][key])
    assert not torch.equal(first["state_dict"][key], trained["state_dict"][key])


def test_glue_card_says_a_choice_pooled_over_holdouts():
    """`holdouts`: the card names how many hold-outs chose and that the epoch is their median."""
    config = BertConfig.from_preset("tiny", vocab_size=100).to_dict()
    trials = [
        {"learning_rate": 1e-3, "seed": 1, "best_epoch": h, "holdout_seed": h} for h in (0, 1)
    ]
    best = {"learning_rate": 1e-3, "seed": 1, "best_epoch": 0, "best_score": 0.5}
    record = {"best": best, "dev_metrics": {"dev": {"pearson": 0.5}}, "trials": trials}
    record |= {"train_examples": 10, "dev_examples": 4, "refits": [{"seed": 1}]}
    record |= {"selected_on": {"train_holdout": {"pearson": 0.5}}}
    card = glue_card(config, "stsb", record, "a folder")
    assert "seeds on 2 held-out slices of train, pooled (2 trials)" in card
    assert "stopped at the median of the epochs its trials chose there, 1." in card
