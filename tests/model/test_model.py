"""Behaviour of the plain-torch BERT: shapes, masking, heads, and that it can learn."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bert_pipeline.model import (
    BertConfig,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
)
from bert_pipeline.model import bert as bert_module
from bert_pipeline.model.bert import IGNORE_INDEX, LOSS_CHUNK_ROWS, linear_cross_entropy

TINY = dict(vocab_size=97, max_position_embeddings=64)


def tiny_config(**overrides) -> BertConfig:
    return BertConfig.from_preset("tiny", **{**TINY, **overrides})


def random_batch(batch_size=3, seq_len=16, vocab_size=97, seed=0):
    gen = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab_size, (batch_size, seq_len), generator=gen)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, seq_len // 2 :] = 1
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, seq_len - 5 :] = 0  # one padded row
    input_ids[attention_mask == 0] = 0
    return input_ids, token_type_ids, attention_mask


def test_presets_and_overrides():
    cfg = BertConfig.from_preset("small", hidden_dropout_prob=0.0)
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads) == (4, 512, 8)
    assert cfg.intermediate_size == 2048 and cfg.hidden_dropout_prob == 0.0
    assert BertConfig.from_preset("large").intermediate_size == 4096
    assert BertConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown BERT preset"):
        BertConfig.from_preset("huge")
    with pytest.raises(ValueError, match="multiple of"):
        BertConfig(hidden_size=100, num_attention_heads=3)


def test_shapes():
    cfg = tiny_config()
    ids, tt, am = random_batch()
    seq, pooled = BertModel(cfg)(ids, tt, am)
    assert seq.shape == (3, 16, 128) and pooled.shape == (3, 128)

    positions = torch.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
    labels = torch.tensor([[7, 8, -100], [9, -100, -100], [10, 11, 12]])
    out = BertForPreTraining(cfg)(ids, tt, am, positions, labels, torch.tensor([0, 1, 0]))
    assert out.prediction_logits.shape == (6, 97)  # only the 6 real masked slots
    assert out.seq_relationship_logits.shape == (3, 2)
    assert torch.allclose(out.loss, out.mlm_loss + out.nsp_loss)
    assert BertForPreTraining(cfg)(ids, tt, am, positions).prediction_logits.shape == (3, 3, 97)

    loss, logits = BertForSequenceClassification(cfg, num_labels=3)(
        ids, tt, am, torch.tensor([0, 2, 1])
    )
    assert logits.shape == (3, 3) and loss.ndim == 0
    loss, logits = BertForSequenceClassification(cfg, num_labels=1)(ids, tt, am, torch.rand(3))
    assert logits.shape == (3, 1) and loss.ndim == 0


def test_init_and_tying():
    model = BertForPreTraining(tiny_config())
    emb = model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.weight is emb
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias
    assert torch.all(emb[0] == 0)  # [PAD] row
    assert abs(emb[1:].std().item() - 0.02) < 0.002
    assert torch.all(model.bert.encoder.layer[0].output.dense.bias == 0)
    assert torch.all(model.bert.embeddings.LayerNorm.weight == 1)
    assert not any("position_ids" in k for k in model.state_dict())


def test_padding_invariance():
    torch.manual_seed(0)
    model = BertModel(tiny_config()).eval()
    ids, tt, am = random_batch()
    extra = 7
    ids_p = torch.cat([ids, torch.zeros(3, extra, dtype=torch.long)], dim=1)
    tt_p = torch.cat([tt, torch.zeros(3, extra, dtype=torch.long)], dim=1)
    am_p = torch.cat([am, torch.zeros(3, extra, dtype=torch.long)], dim=1)
    with torch.no_grad():
        seq, pooled = model(ids, tt, am)
        seq_p, pooled_p = model(ids_p, tt_p, am_p)
        seq_1, _ = model(ids[1:2, :11], tt[1:2, :11])  # the padded row alone, unpadded
    real = am.bool()
    torch.testing.assert_close(seq_p[:, :16][real], seq[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pooled_p, pooled, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(seq[1, :11], seq_1[0], atol=1e-5, rtol=1e-5)


def test_a_compiled_training_step_is_one_graph_with_the_eager_loss():
    """Under torch.compile a host read (the mask's `.all()`) or a data-dependent shape (the used
    masked rows) breaks the graph: Dynamo warned at the start of every compiled (bf16) budget
    run and compiled the step in three pieces."""
    model = BertForPreTraining(tiny_config()).eval()
    ids, tt, am = random_batch()
    positions = torch.tensor([[1, 2, 3], [4, 5, 0], [6, 7, 0]])
    labels = torch.tensor([[7, 8, 9], [10, 11, -100], [12, -100, -100]])
    args = (ids, tt, torch.ones_like(am), positions, labels, torch.tensor([0, 1, 0]))
    explanation = torch._dynamo.explain(model)(*args, return_logits=False)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(model, backend="eager")  # Dynamo's graph, run without Inductor
    torch.testing.assert_close(compiled(*args, return_logits=False).loss, model(*args).loss)


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_on_a_cpu_attention_is_the_explicit_form_with_sdpa_outputs_and_gradients(
    monkeypatch, causal
):
    """A compiled CPU step takes softmax(QK^T)V (inductor fuses it; torch's flash kernel has a slow
    bf16 backward): the same outputs and gradients as SDPA, padding and causal masks included."""
    torch.manual_seed(0)
    config = tiny_config(
        is_decoder=causal, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    model = BertModel(config, add_pooling_layer=False)
    ids, tt, am = random_batch()

    def outputs_and_gradients(forward):
        model.zero_grad()
        seq, _ = forward(ids, tt, am)
        seq.square().sum().backward()
        return seq.detach(), [p.grad.clone() for p in model.parameters()]

    eager = outputs_and_gradients(model)

    def no_sdpa(*args, **kwargs):
        raise AssertionError("SDPA called in a compiled CPU step")

    monkeypatch.setattr(bert_module.F, "scaled_dot_product_attention", no_sdpa)
    compiled = outputs_and_gradients(torch.compile(model, backend="eager"))
    torch.testing.assert_close(compiled, eager, atol=1e-4, rtol=1e-4)


def test_mean_pooled_classifier_reads_only_the_unpadded_tokens():
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config(classifier_pooling="mean"), 2).eval()
    assert model.bert.pooler is None
    ids, tt, am = random_batch()
    with torch.no_grad():
        _, logits = model(ids, tt, am)
        seq, _ = model.bert(ids, tt, am)
        _, alone = model(ids[1:2, :11], tt[1:2, :11])  # the padded row, unpadded
    means = torch.stack([seq[i][am[i].bool()].mean(0) for i in range(3)])
    torch.testing.assert_close(logits, model.classifier(means))
    torch.testing.assert_close(alone[0], logits[1], atol=1e-5, rtol=1e-5)
    config = model.config.to_dict()
    assert config["classifier_pooling"] == "mean"
    assert "classifier_pooling" not in tiny_config().to_dict()  # transformers' config.json
    assert BertConfig.from_dict(config) == model.config
    with pytest.raises(ValueError, match="classifier_pooling='max' is not supported"):
        tiny_config(classifier_pooling="max")


def test_gathered_mlm_head_equals_full_head():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config()).eval()
    ids, tt, am = random_batch()
    positions = torch.tensor([[1, 4, 0], [2, 3, 9], [0, 0, 0]])
    labels = torch.tensor([[5, 6, -100], [7, 8, 9], [-100, -100, -100]])
    with torch.no_grad():
        out = model(ids, tt, am, positions, labels)
        seq, _ = model.bert(ids, tt, am)
        full = model.cls.predictions(seq)  # [B, T, V], what HF computes
    keep = labels != -100
    rows = torch.arange(3)[:, None].expand_as(positions)[keep]
    expected = full[rows, positions[keep]]
    torch.testing.assert_close(out.prediction_logits, expected, atol=1e-5, rtol=1e-5)
    expected_loss = torch.nn.functional.cross_entropy(expected, labels[keep])
    torch.testing.assert_close(out.mlm_loss, expected_loss)


@pytest.mark.parametrize("rows", [1, LOSS_CHUNK_ROWS, 2 * LOSS_CHUNK_ROWS + 5])
def test_linear_cross_entropy_equals_cross_entropy_of_the_logits(rows):
    gen = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 16, generator=gen)
    weight = torch.randn(300, 16, generator=gen)
    bias = torch.randn(300, generator=gen)
    targets = torch.randint(0, 300, (rows,), generator=gen)
    targets[1::3] = IGNORE_INDEX  # unused prediction slots, as a compiled step passes them

    def loss_and_grads(loss_fn):
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        loss = loss_fn(*leaves, targets) * 3.0  # a non-unit upstream gradient
        loss.backward()
        return loss.detach(), *(leaf.grad for leaf in leaves)

    fused = loss_and_grads(linear_cross_entropy)
    plain = loss_and_grads(lambda x, w, b, t: F.cross_entropy(F.linear(x, w, b), t))
    for got, expected in zip(fused, plain, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_training_forward_without_logits_gives_the_same_losses_and_gradients(bf16, compiled):
    """The training step's masked-LM loss without logits (eager: chunks of the used rows;
    compiled: every slot in one chunk) against the plain head's, in fp32 and under autocast."""
    torch.manual_seed(0)
    config = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForPreTraining(config).train()
    ids, tt, am = random_batch()
    positions = torch.tensor([[1, 4, 0], [2, 3, 9], [5, 6, 7]])
    labels = torch.tensor([[5, 6, -100], [7, 8, 9], [10, 11, 12]])
    nsp = torch.tensor([0, 1, 0])

    def run(return_logits):
        forward = torch.compile(model, backend="eager") if compiled else model
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = forward(ids, tt, am, positions, labels, nsp, return_logits=return_logits)
        out.loss.backward()
        return out, {n: p.grad.clone() for n, p in model.named_parameters()}

    (plain, plain_grads), (fused, fused_grads) = run(True), run(False)
    assert fused.prediction_logits is None and plain.prediction_logits.shape == (8, 97)
    # bf16: the plain head sums the bias gradient in bf16, the fused one in fp32
    tol = {"atol": 1e-3, "rtol": 1e-2} if bf16 else {"atol": 1e-6, "rtol": 1e-5}
    torch.testing.assert_close(fused.mlm_loss, plain.mlm_loss, **tol)
    torch.testing.assert_close(fused.loss, plain.loss, **tol)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(fused_grads[name], grad, **tol, msg=name)


def test_no_masked_token_gives_zero_mlm_loss_with_graph():
    model = BertForPreTraining(tiny_config())
    ids, tt, am = random_batch()
    labels = torch.full((3, 2), -100)
    out = model(ids, tt, am, torch.zeros(3, 2, dtype=torch.long), labels)
    assert out.mlm_loss.item() == 0.0 and out.mlm_loss.requires_grad


def test_overfits_a_tiny_batch():
    torch.manual_seed(0)
    model = BertForPreTraining(
        tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    )
    ids, tt, am = random_batch()
    positions = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    labels = ids.gather(1, positions)
    ids = ids.scatter(1, positions, 3)
    nsp = torch.tensor([0, 1, 0])
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    losses = []
    for _ in range(40):
        loss = model(ids, tt, am, positions, labels, nsp).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses


def test_dropout_only_in_training():
    model = BertModel(tiny_config(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5))
    ids, tt, am = random_batch()
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(ids, tt, am)[0], model(ids, tt, am)[0])
    model.train()
    with torch.no_grad():
        assert not torch.allclose(model(ids, tt, am)[0], model(ids, tt, am)[0])


@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu"])
def test_models_pickle(act):
    """Lightning and multiprocessing pickle/deepcopy modules; activations must allow it."""
    import copy
    import pickle

    model = BertForPreTraining(tiny_config(hidden_act=act))
    clone = pickle.loads(pickle.dumps(model))
    ids, tt, am = random_batch()
    model.eval(), clone.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(ids, tt, am)[3], clone(ids, tt, am)[3])
    for twin in (clone, copy.deepcopy(model)):
        assert twin.cls.predictions.decoder.weight is twin.bert.embeddings.word_embeddings.weight
