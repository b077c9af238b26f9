"""The paper's Table 5 models: a left-to-right encoder (config `is_decoder`, transformers' field)
and a randomly initialised BiLSTM between an encoder and its task head (`head_lstm_size`)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from bert_pipeline.model import (
    BertConfig,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertModel,
    hidden_states,
)
from bert_pipeline.model.checkpoint import (
    CheckpointMismatchError,
    model_from_checkpoint,
    model_to_checkpoint,
    with_new_head,
    write_checkpoint,
)

CAUSAL = BertConfig.from_preset("tiny", vocab_size=120, max_position_embeddings=32, is_decoder=True)


def _inputs(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 120, (3, 12), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    return ids, types, mask


def test_a_left_to_right_encoder_never_reads_later_tokens():
    model = BertModel(CAUSAL).eval()
    ids, types, mask = _inputs()
    later = ids.clone()
    later[:, 7:] = 9
    before, _ = model(ids, types, mask)
    after, _ = model(later, types, mask)
    torch.testing.assert_close(before[:, :7], after[:, :7])
    assert not torch.allclose(before[1, 7:], after[1, 7:])
    states = hidden_states(model, ids, types, mask)  # the feature-based route is causal too
    torch.testing.assert_close(states[-1][mask.bool()], before[mask.bool()])


def test_the_causal_encoder_equals_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    model = BertModel(CAUSAL).eval()
    folder = write_checkpoint(model_to_checkpoint(model), tmp_path / "ltr")
    reference = transformers.BertModel.from_pretrained(folder).eval()
    assert reference.config.is_decoder
    ids, types, mask = _inputs()
    ours, _ = model(ids, types, mask)
    theirs = reference(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(ours[mask.bool()], theirs[mask.bool()], rtol=1e-5, atol=1e-5)


def test_a_bidirectional_config_json_is_unchanged():
    assert "is_decoder" not in BertConfig().to_dict()
    assert "head_lstm_size" not in BertConfig().to_dict()
    assert BertConfig.from_dict(CAUSAL.to_dict()).is_decoder


def test_cls_pooling_on_a_left_to_right_encoder_is_refused():
    checkpoint = model_to_checkpoint(BertModel(CAUSAL))
    with pytest.raises(
        CheckpointMismatchError, match=r"ltr: classifier_pooling 'cls' reads \[CLS\].*to last"
    ):
        with_new_head(checkpoint, BertForSequenceClassification, 2, "ltr", 0)
    model = with_new_head(
        checkpoint, BertForSequenceClassification, 2, "ltr", 0, classifier_pooling="last"
    ).eval()
    ids, types, mask = _inputs()
    hidden, _ = model.bert(ids, types, mask)
    summary = model.summary(hidden, None, mask)
    torch.testing.assert_close(summary[0], hidden[0, 7])  # row 0 ends at its 8th token
    torch.testing.assert_close(summary[1], hidden[1, 11])


@pytest.mark.parametrize("model_cls", [BertForSequenceClassification, BertForQuestionAnswering])
def test_a_bilstm_head_is_seeded_saved_and_loaded(model_cls, tmp_path):
    checkpoint = model_to_checkpoint(BertModel(CAUSAL))
    labels = 3 if model_cls is BertForSequenceClassification else None
    head = "classifier" if labels else "qa_outputs"

    def build(seed):
        return with_new_head(
            checkpoint, model_cls, labels, "ltr", seed, head=head, head_lstm_size=8
        ).eval()

    first, again, other = build(1), build(1), build(2)
    weights = first.head_lstm.lstm.weight_hh_l0
    torch.testing.assert_close(weights, again.head_lstm.lstm.weight_hh_l0)
    assert not torch.allclose(weights, other.head_lstm.lstm.weight_hh_l0)
    assert getattr(first, head).in_features == 16  # both directions
    ids, types, mask = _inputs()
    out = first(ids, types, mask)
    exported = model_to_checkpoint(first)
    assert exported["config"]["head_lstm_size"] == 8
    loaded = model_from_checkpoint(exported, model_cls).eval()
    for a, b in zip(out[1:], loaded(ids, types, mask)[1:], strict=True):
        torch.testing.assert_close(a, b)
    pooling = {"classifier_pooling": "last"} if labels else {}
    fresh = with_new_head(exported, model_cls, labels, "ltr", 1, head=head, **pooling)
    assert fresh.head_lstm is None  # a new task asks for its own BiLSTM or none


def test_the_bilstm_reads_only_unpadded_tokens():
    model = with_new_head(
        model_to_checkpoint(BertModel(CAUSAL)),
        BertForSequenceClassification,
        2,
        "ltr",
        0,
        head_lstm_size=4,
    ).eval()
    ids, types, mask = _inputs()
    padded_other = ids.clone()
    padded_other[0, 8:] = 11  # row 0's padding
    torch.testing.assert_close(model(ids, types, mask)[1], model(padded_other, types, mask)[1])


def test_the_bilstm_runs_in_float32_under_autocast():
    """torch's autocast would run a cuDNN LSTM in float16 even under bf16-mixed (no loss scaling
    there): the head runs it in float32 on every device, whatever dtype its input has."""
    from bert_pipeline.model.bert import HeadLSTM

    head = HeadLSTM(dataclasses.replace(CAUSAL, head_lstm_size=4))
    x = torch.randn(3, 12, CAUSAL.hidden_size)
    mask = (torch.arange(12) < torch.tensor([[12], [7], [1]])).long()
    expected = head(x, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = head(x.bfloat16(), mask)
    for out, want in zip(got, expected, strict=True):
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, want, atol=0.02, rtol=0.02)  # bf16 input rounding only


def test_no_weight_decay_on_the_bilstm_biases():
    from bert_pipeline.training.core import parameter_groups

    model = with_new_head(
        model_to_checkpoint(BertModel(CAUSAL)),
        BertForQuestionAnswering,
        None,
        "ltr",
        0,
        head="qa_outputs",
        head_lstm_size=4,
    )
    decay, no_decay = parameter_groups(model, 0.01)
    lstm = dict(model.head_lstm.named_parameters())
    assert {id(p) for n, p in lstm.items() if "bias" in n} <= {id(p) for p in no_decay["params"]}
    assert {id(p) for n, p in lstm.items() if "weight" in n} <= {id(p) for p in decay["params"]}


def test_the_served_left_to_right_encoder_embeds_by_its_last_token(tmp_path):
    from bert_pipeline.data.tokenizer import tokenizer_from_files
    from bert_pipeline.serving import SentenceModel
    from tests.glue.helpers import tiny_checkpoint

    checkpoint = tiny_checkpoint(is_decoder=True)
    tokenizer = tokenizer_from_files(checkpoint["tokenizer_files"], True, "ltr")
    model = SentenceModel(checkpoint, "ltr", tokenizer, {"max_seq_length": 32})
    rows = model.table(pd.DataFrame({"text_a": ["the cat watches the letter.", "a farmer finds."]}))
    out = model.predict_rows(rows)
    assert list(out.columns) == ["last_embedding", "mean_embedding"]
    assert out["last_embedding"][0] != out["last_embedding"][1]
