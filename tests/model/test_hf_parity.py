"""Numerical parity with transformers' BERT (fp32, eval mode) and HF-format interchange."""

from __future__ import annotations

import logging

import pytest
import torch

from bert_pipeline.model import (
    BertConfig,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    hidden_states,
)
from bert_pipeline.model.checkpoint import (
    load_pretrained,
    model_to_checkpoint,
    save_pretrained,
    write_checkpoint,
)

transformers = pytest.importorskip("transformers")

CONFIGS = {
    "tiny": BertConfig.from_preset("tiny", vocab_size=211, max_position_embeddings=40),
    "odd": BertConfig(
        vocab_size=150,
        hidden_size=96,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=200,
        max_position_embeddings=32,
        type_vocab_size=3,
        layer_norm_eps=1e-7,
    ),
    "one_head": BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=64,
    ),
}
ATOL = 1e-5


def hf_config(config: BertConfig, **extra):
    return transformers.BertConfig(**config.to_dict(), attn_implementation="sdpa", **extra)


def batch(config: BertConfig, seed: int = 0, B: int = 4, T: int = 24):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([T, T - 3, 9, 2])[:B]
    input_ids = torch.randint(1, config.vocab_size, (B, T), generator=gen)
    token_type_ids = torch.randint(0, config.type_vocab_size, (B, T), generator=gen)
    attention_mask = (torch.arange(T)[None] < lengths[:, None]).long()
    input_ids = input_ids * attention_mask
    return input_ids, token_type_ids * attention_mask, attention_mask


def hf_twin(model, hf_cls, **extra):
    hf = hf_cls(hf_config(model.config, **extra))
    hf.load_state_dict(model.state_dict())
    return hf.eval()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_pretraining_outputs_match_hf(name):
    torch.manual_seed(0)
    ours = BertForPreTraining(CONFIGS[name]).eval()
    hf = hf_twin(ours, transformers.BertForPreTraining)
    ids, tt, am = batch(ours.config)
    with torch.no_grad():
        seq, pooled = ours.bert(ids, tt, am)
        out = ours(ids, tt, am)  # masked_lm_positions=None: every position
        ref = hf(input_ids=ids, token_type_ids=tt, attention_mask=am, output_hidden_states=True)
        ref_seq, ref_pooled = hf.bert(input_ids=ids, token_type_ids=tt, attention_mask=am)[:2]
    real = am.bool()
    torch.testing.assert_close(seq[real], ref_seq[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(pooled, ref_pooled, atol=ATOL, rtol=0)
    torch.testing.assert_close(
        out.prediction_logits[real], ref.prediction_logits[real], atol=ATOL, rtol=0
    )
    torch.testing.assert_close(
        out.seq_relationship_logits, ref.seq_relationship_logits, atol=ATOL, rtol=0
    )


def test_bert_model_without_mask_or_segments_matches_hf():
    torch.manual_seed(1)
    ours = BertModel(CONFIGS["tiny"]).eval()
    hf = hf_twin(ours, transformers.BertModel)
    ids = batch(ours.config)[0]
    with torch.no_grad():
        seq, pooled = ours(ids)
        ref = hf(input_ids=ids)
    torch.testing.assert_close(seq, ref.last_hidden_state, atol=ATOL, rtol=0)
    torch.testing.assert_close(pooled, ref.pooler_output, atol=ATOL, rtol=0)


def test_hidden_states_match_hf_output_hidden_states():
    torch.manual_seed(6)
    ours = BertModel(CONFIGS["odd"]).eval()
    hf = hf_twin(ours, transformers.BertModel)
    ids, tt, am = batch(ours.config)
    with torch.no_grad():
        states = hidden_states(ours, ids, tt, am)
        ref = hf(input_ids=ids, token_type_ids=tt, attention_mask=am, output_hidden_states=True)
    assert len(states) == len(ref.hidden_states) == ours.config.num_hidden_layers + 1
    for mine, theirs in zip(states, ref.hidden_states, strict=True):
        keep = am.bool()  # padded positions are not defined the same way
        torch.testing.assert_close(mine[keep], theirs[keep], atol=ATOL, rtol=0)


@pytest.mark.parametrize("num_labels", [1, 3])
def test_sequence_classification_matches_hf(num_labels):
    torch.manual_seed(2)
    ours = BertForSequenceClassification(CONFIGS["odd"], num_labels=num_labels).eval()
    hf = hf_twin(ours, transformers.BertForSequenceClassification, num_labels=num_labels)
    ids, tt, am = batch(ours.config)
    labels = torch.rand(4) if num_labels == 1 else torch.tensor([0, 2, 1, 2])
    with torch.no_grad():
        loss, logits = ours(ids, tt, am, labels)
        ref = hf(input_ids=ids, token_type_ids=tt, attention_mask=am, labels=labels)
    torch.testing.assert_close(logits, ref.logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(loss, ref.loss, atol=ATOL, rtol=0)


def test_token_classification_matches_hf_and_exports(tmp_path):
    torch.manual_seed(4)
    ours = BertForTokenClassification(CONFIGS["odd"], num_labels=5).eval()
    hf = hf_twin(ours, transformers.BertForTokenClassification, num_labels=5)
    ids, tt, am = batch(ours.config)
    labels = torch.randint(0, 5, ids.shape)
    labels[:, ::3] = -100  # later sub-tokens and special tokens are ignored
    with torch.no_grad():
        loss, logits = ours(ids, tt, am, labels)
        ref = hf(input_ids=ids, token_type_ids=tt, attention_mask=am, labels=labels)
    torch.testing.assert_close(logits, ref.logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(loss, ref.loss, atol=ATOL, rtol=0)
    write_checkpoint(model_to_checkpoint(ours, labels=list("OABCD")), tmp_path / "ner")
    loaded, info = transformers.BertForTokenClassification.from_pretrained(
        tmp_path / "ner", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert loaded.config.id2label[1] == "A"


def test_question_answering_matches_hf_and_exports(tmp_path):
    torch.manual_seed(7)
    ours = BertForQuestionAnswering(CONFIGS["odd"]).eval()
    hf = hf_twin(ours, transformers.BertForQuestionAnswering)
    ids, tt, am = batch(ours.config)
    starts, ends = torch.tensor([1, 3, 30, 0]), torch.tensor([2, 5, 31, 0])  # 30: cut off
    with torch.no_grad():
        loss, start, end = ours(ids, tt, am, starts, ends)
        ref = hf(
            input_ids=ids,
            token_type_ids=tt,
            attention_mask=am,
            start_positions=starts,
            end_positions=ends,
        )
    torch.testing.assert_close(start, ref.start_logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(end, ref.end_logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(loss, ref.loss, atol=ATOL, rtol=0)
    save_pretrained(ours, tmp_path / "qa")
    _, info = transformers.BertForQuestionAnswering.from_pretrained(
        tmp_path / "qa", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_export_loads_in_hf_without_missing_weights(tmp_path, caplog):
    torch.manual_seed(3)
    ours = BertForPreTraining(CONFIGS["odd"]).eval()
    save_pretrained(ours, tmp_path / "ckpt")
    ids, tt, am = batch(ours.config)
    with caplog.at_level(logging.WARNING):
        hf, info = transformers.BertForPreTraining.from_pretrained(
            tmp_path / "ckpt", output_loading_info=True
        )
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    for problem in ("MISSING", "newly initialized", "corrupted", "UNEXPECTED", "MISMATCH"):
        assert problem not in caplog.text, caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # the heads are unused here, but nothing is missing
        hf_bert, bert_info = transformers.BertModel.from_pretrained(
            tmp_path / "ckpt", output_loading_info=True
        )
    assert not bert_info["missing_keys"] and not bert_info["mismatched_keys"]
    for problem in ("MISSING", "newly initialized", "corrupted", "MISMATCH"):
        assert problem not in caplog.text, caplog.text
    assert (
        hf.cls.predictions.decoder.weight.data_ptr()
        == hf.bert.embeddings.word_embeddings.weight.data_ptr()
    )
    with torch.no_grad():
        ref = hf.eval()(input_ids=ids, token_type_ids=tt, attention_mask=am)
        ref_seq = hf_bert.eval()(
            input_ids=ids, token_type_ids=tt, attention_mask=am
        ).last_hidden_state
        out = ours(ids, tt, am)
        seq, _ = ours.bert(ids, tt, am)
    real = am.bool()
    torch.testing.assert_close(
        out.prediction_logits[real], ref.prediction_logits[real], atol=ATOL, rtol=0
    )
    torch.testing.assert_close(
        out.seq_relationship_logits, ref.seq_relationship_logits, atol=ATOL, rtol=0
    )
    torch.testing.assert_close(seq[real], ref_seq[real], atol=ATOL, rtol=0)

    # and back: HF's own save_pretrained -> ours
    hf.save_pretrained(tmp_path / "hf")
    back, back_info = load_pretrained(tmp_path / "hf", output_loading_info=True)
    assert back_info.missing_keys == [] and back_info.unexpected_keys == []
    with torch.no_grad():
        again = back(ids, tt, am)
    torch.testing.assert_close(again.prediction_logits, out.prediction_logits, atol=0, rtol=0)


def test_hf_bert_model_checkpoint_into_our_pretraining_model(tmp_path):
    hf = transformers.BertModel(hf_config(CONFIGS["tiny"])).eval()
    hf.save_pretrained(tmp_path / "hf")
    ours, info = load_pretrained(tmp_path / "hf", output_loading_info=True)
    assert info.missing_keys and all(k.startswith("cls.") for k in info.missing_keys)
    ids, tt, am = batch(ours.config)
    with torch.no_grad():
        seq, _ = ours.bert(ids, tt, am)
        ref = hf(input_ids=ids, token_type_ids=tt, attention_mask=am).last_hidden_state
    real = am.bool()
    torch.testing.assert_close(seq[real], ref[real], atol=ATOL, rtol=0)


def test_one_training_step_matches_hf():
    torch.manual_seed(4)
    config = BertConfig.from_preset(
        "tiny", vocab_size=211, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    ours = BertForPreTraining(config).train()
    hf = hf_twin(ours, transformers.BertForPreTraining).train()
    ids, tt, am = batch(config)
    positions = torch.tensor([[1, 5, 7], [2, 3, 0], [4, 0, 0], [1, 0, 0]])
    labels = torch.tensor([[10, 11, 12], [13, 14, -100], [15, -100, -100], [16, -100, -100]])
    hf_labels = torch.full_like(ids, -100)
    keep = labels != -100
    rows = torch.arange(4)[:, None].expand_as(positions)
    hf_labels[rows[keep], positions[keep]] = labels[keep]
    nsp = torch.tensor([0, 1, 1, 0])

    loss = ours(ids, tt, am, positions, labels, nsp).loss
    ref = hf(
        input_ids=ids,
        token_type_ids=tt,
        attention_mask=am,
        labels=hf_labels,
        next_sentence_label=nsp,
    ).loss
    torch.testing.assert_close(loss, ref, atol=1e-5, rtol=1e-5)
    loss.backward()
    ref.backward()
    hf_params = dict(hf.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, hf_params[name].grad, atol=1e-6, rtol=1e-4, msg=name)


def test_exported_classifier_loads_in_hf(tmp_path):
    torch.manual_seed(5)
    ours = BertForSequenceClassification(CONFIGS["tiny"], num_labels=3).eval()
    save_pretrained(ours, tmp_path / "ckpt")
    hf, info = transformers.BertForSequenceClassification.from_pretrained(
        tmp_path / "ckpt", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, tt, am = batch(ours.config)
    with torch.no_grad():
        ref = hf.eval()(input_ids=ids, token_type_ids=tt, attention_mask=am).logits
        torch.testing.assert_close(ours(ids, tt, am)[1], ref, atol=ATOL, rtol=0)
