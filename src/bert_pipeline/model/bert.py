"""BERT (Devlin et al., 2019) in plain PyTorch.

Module and parameter names follow Hugging Face's ``modeling_bert`` one-to-one, so
``state_dict()`` keys and shapes equal those of ``transformers.BertModel`` /
``BertForPreTraining`` / ``BertForSequenceClassification`` and checkpoints move both ways
without renaming. The deliberate differences are for speed in pre-training: the masked-LM
head runs only on the gathered masked positions, not on every token, the last encoder
layer only on those and [CLS] (see ``BertForPreTraining``), and a training step can take
the masked-LM loss without the [N, vocab] logits (``linear_cross_entropy``), and compiled on a
CPU attention is the explicit softmax(QK^T)V rather than torch's SDPA kernel; outputs are the
same.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from bert_pipeline.model.config import BertConfig

IGNORE_INDEX = -100  # a label position no loss reads (torch's cross_entropy default)


def activation(name: str):
    """The feed-forward non-linearity; "gelu" is the exact erf form used by BERT."""
    if name == "gelu":
        return F.gelu
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return functools.partial(F.gelu, approximate="tanh")
    if name == "relu":
        return F.relu
    raise ValueError(f"unsupported hidden_act {name!r}")


# ---------------------------------------------------------------------------- embeddings


class BertEmbeddings(nn.Module):
    """Token + segment + learned position embeddings, summed, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        h = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, h, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, h)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, h)
        self.LayerNorm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(positions)
        )
        return self.dropout(self.LayerNorm(x))


# ---------------------------------------------------------------------------- encoder


class BertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention of ``queries`` over the whole sequence ``x``."""

    # Compiled on a CPU, the explicit softmax(QK^T)V is fused by inductor, while torch's CPU flash
    # kernel has a slow bf16 backward: a ~1.2x faster budget step (benchmarks/training_speed.py
    # turns this off to time the difference).
    explicit_when_compiled_on_cpu = True

    def __init__(self, config: BertConfig):
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, queries: Tensor, x: Tensor, attn_mask: Tensor | None) -> Tensor:
        B, Tq, H = queries.shape

        def heads(t: Tensor) -> Tensor:  # [B, T, H] -> [B, heads, T, head_dim]
            return t.view(B, t.size(1), self.num_heads, H // self.num_heads).transpose(1, 2)

        q, k, v = heads(self.query(queries)), heads(self.key(x)), heads(self.value(x))
        dropout_p = self.dropout_p if self.training else 0.0
        explicit = self.explicit_when_compiled_on_cpu and q.device.type == "cpu"
        if explicit and torch.compiler.is_compiling():
            scores = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5
            if attn_mask is not None:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            y = F.dropout(scores.softmax(dim=-1), dropout_p, self.training) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
        return y.transpose(1, 2).reshape(B, Tq, H)


class BertResidualOutput(nn.Module):
    """Post-LN sub-layer output: LayerNorm(residual + dropout(dense(x)))."""

    def __init__(self, in_features: int, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(residual + self.dropout(self.dense(x)))


class BertAttention(nn.Module):
    """Self-attention sub-layer (HF calls its two parts ``self`` and ``output``).

    With ``rows`` [B, K] only those positions are computed (they still attend to all of ``x``).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertResidualOutput(config.hidden_size, config)

    def forward(self, x: Tensor, attn_mask: Tensor | None, rows: Tensor | None = None) -> Tensor:
        queries = x if rows is None else x.gather(1, rows[..., None].expand(-1, -1, x.size(-1)))
        return self.output(self.self(queries, x, attn_mask), queries)


class BertIntermediate(nn.Module):
    """First half of the position-wise feed-forward network: dense + activation."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act)

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.dense(x))


class BertLayer(nn.Module):
    """One Transformer encoder block: attention, then feed-forward, each post-LN."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertResidualOutput(config.intermediate_size, config)

    def forward(self, x: Tensor, attn_mask: Tensor | None, rows: Tensor | None = None) -> Tensor:
        x = self.attention(x, attn_mask, rows)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    """The stack of layers. ``output_rows`` [B, K] restricts the last layer to those positions:
    exact, since nothing after it mixes positions, and it skips most of that layer's work when
    only the [CLS] and masked positions are needed (pre-training)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(
        self, x: Tensor, attn_mask: Tensor | None, output_rows: Tensor | None = None
    ) -> Tensor:
        for i, block in enumerate(self.layer):
            x = block(x, attn_mask, output_rows if i == len(self.layer) - 1 else None)
        return x


class BertPooler(nn.Module):
    """Sentence representation: tanh(dense(hidden state of [CLS]))."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, sequence_output: Tensor) -> Tensor:
        return torch.tanh(self.dense(sequence_output[:, 0]))


# ---------------------------------------------------------------------------- base model


class BertPreTrainedModel(nn.Module):
    """Shared weight initialisation: N(0, initializer_range), zero biases, LayerNorm 1/0."""

    config: BertConfig

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, BertLMPredictionHead):
            nn.init.zeros_(module.bias)


def extended_attention_mask(
    attention_mask: Tensor | None, causal: bool = False, input_ids: Tensor | None = None
) -> Tensor | None:
    """[B, T] 1/0 padding mask -> boolean [B, 1, 1, T] keys mask for SDPA (None if no padding);
    `causal` (a left-to-right encoder reading `input_ids`) also hides the later positions:
    [B or 1, 1, T, T] on the inputs' device."""
    keys = None
    # Eager: no mask when nothing is padded, so SDPA can take its fastest kernel. Compiled: the
    # check would read a tensor on the host and break the graph, so the mask is always passed.
    if attention_mask is not None and (
        torch.compiler.is_compiling() or not bool(attention_mask.all())
    ):
        keys = attention_mask.bool()[:, None, None, :]
    if not causal:
        return keys
    length = input_ids.shape[1]
    earlier = torch.ones(length, length, dtype=torch.bool, device=input_ids.device).tril()
    return earlier[None, None] if keys is None else earlier[None, None] & keys


class BertModel(BertPreTrainedModel):
    """The bidirectional encoder: returns (sequence_output [B, T, H], pooled_output [B, H]).

    ``output_rows`` [B, K] (first column 0, the [CLS] the pooler reads) returns only those
    positions, sequence_output [B, K, H], at a lower cost; see ``BertEncoder``. Without a
    pooler (token classification, as HF's) pooled_output is None.
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.apply(self._init_weights)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        output_rows: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        causal = self.config.is_decoder
        mask = extended_attention_mask(attention_mask, causal, input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        if causal and output_rows is not None:  # the mask's query rows are every position
            x = self.encoder(x, mask)
            x = x.gather(1, output_rows[..., None].expand(-1, -1, x.size(-1)))
        else:
            x = self.encoder(x, mask, output_rows)
        return x, None if self.pooler is None else self.pooler(x)


def hidden_states(
    model: BertModel,
    input_ids: Tensor,
    token_type_ids: Tensor | None = None,
    attention_mask: Tensor | None = None,
) -> list[Tensor]:
    """[embeddings output, layer 1, ..., layer L], each [B, T, H]: the per-layer token
    features of the feature-based approach (google's extract_features.py)."""
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    x = model.embeddings(input_ids, token_type_ids)
    mask = extended_attention_mask(attention_mask, model.config.is_decoder, input_ids)
    states = [x]
    for block in model.encoder.layer:
        x = block(x, mask)
        states.append(x)
    return states


# ---------------------------------------------------------------------------- pre-training


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x: Tensor) -> Tensor:
        return self.LayerNorm(self.act(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    """Masked-LM head: transform, then a decoder tied to the word embeddings plus an output bias."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        # One bias under two names, as in HF: cls.predictions.bias and .decoder.bias.
        self.decoder.bias = self.bias

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.transform(x))


LOSS_CHUNK_ROWS = 96  # rows of logits per chunk: 96 x a 16k vocab (6 MB) stays in cache


class _LinearCrossEntropy(torch.autograd.Function):
    """cross_entropy(x @ weight.T + bias, targets), its gradients made in the forward pass.

    The logits become the softmax and then their own gradient in place, so no [N, vocab]
    tensor is kept for the backward: for a 128-wide model that tensor's passes (bias copy,
    log-softmax and its backward, the one-hot fill, the bias sum) cost more than its matmuls
    (benchmarks/training_speed_no_bf16_units.md). Eager, it goes chunk by chunk of rows that
    stay in cache; compiled, in one chunk: inductor fuses those passes row by row, and the
    matmuls stay whole, as AMX runs them fastest. The matmuls run in `dtype` (autocast's bf16,
    as the plain head's), the softmax in fp32.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, targets, dtype):
        valid = targets != IGNORE_INDEX
        scale = 1.0 / valid.sum().clamp(min=1)
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        xm, wm, bm = x.to(dtype), weight.to(dtype), bias.to(dtype)
        grad_x, grad_w, grad_b = map(torch.zeros_like, (xm, weight, bias))
        total = x.new_zeros((), dtype=torch.float32)
        chunk = x.shape[0] if torch.compiler.is_compiling() else LOSS_CHUNK_ROWS
        for start in range(0, x.shape[0], chunk):
            rows = slice(start, start + chunk)
            xc, tc, keep = xm[rows], targets[rows].clamp(min=0), valid[rows, None]
            logits = F.linear(xc, wm, bm).float()
            lse = torch.logsumexp(logits, dim=1, keepdim=True)
            total += ((lse - logits.gather(1, tc[:, None])) * keep).sum()
            grad = logits.sub_(lse).exp_()  # softmax - one-hot, over the valid targets
            grad[torch.arange(len(tc), device=tc.device), tc] -= 1.0
            grad.mul_(keep * scale)
            if need_b:
                grad_b += grad.sum(0)
            grad = grad.to(dtype)
            if need_x:
                grad_x[rows] = grad @ wm
            if need_w and grad.dtype == grad_w.dtype:
                grad_w.addmm_(grad.t(), xc)  # in place: no [vocab, hidden] temporary per chunk
            elif need_w:
                grad_w += grad.t() @ xc  # a bf16 product into the fp32 gradient
        ctx.save_for_backward(grad_x.to(x.dtype), grad_w, grad_b)  # zeros where not needed
        return total * scale

    @staticmethod
    def backward(ctx, grad_loss: Tensor):
        return *(g * grad_loss for g in ctx.saved_tensors), None, None


def linear_cross_entropy(x: Tensor, weight: Tensor, bias: Tensor, targets: Tensor) -> Tensor:
    """``F.cross_entropy(F.linear(x, weight, bias), targets, ignore_index=IGNORE_INDEX)`` (mean
    over the valid targets) without the logits in memory; under autocast its matmuls are in
    autocast's dtype. No double backward."""
    device = x.device.type
    autocast = torch.is_autocast_enabled(device)
    dtype = torch.get_autocast_dtype(device) if autocast else weight.dtype
    with torch.autocast(device, enabled=False):
        return _LinearCrossEntropy.apply(x, weight, bias, targets, dtype)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


class BertPreTrainingOutput(NamedTuple):
    """Losses are None when the matching labels are not given.

    ``prediction_logits`` is None where the forward took the masked-LM loss without them
    (``return_logits=False``, see ``BertForPreTraining.forward``), else [N, vocab] for the N
    entries with ``masked_lm_labels != IGNORE_INDEX`` (row-major over [B, P]) when labels are
    given, else [B, P, vocab] for every position asked for.
    """

    loss: Tensor | None
    mlm_loss: Tensor | None
    nsp_loss: Tensor | None
    prediction_logits: Tensor | None
    seq_relationship_logits: Tensor


class BertForPreTraining(BertPreTrainedModel):
    """BERT with the masked-LM and next-sentence-prediction heads.

    The MLM head (a hidden x vocab matmul plus a vocab-wide softmax) only runs on the
    gathered masked positions, ~15% of tokens: most of the speed-up over HF for small models,
    where that head costs more than the encoder. The last encoder layer likewise only
    computes the [CLS] and masked rows (exact; see ``BertEncoder``).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.apply(self._init_weights)
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        masked_lm_positions: Tensor | None = None,
        masked_lm_labels: Tensor | None = None,
        next_sentence_label: Tensor | None = None,
        return_logits: bool = True,
    ) -> BertPreTrainingOutput:
        """``return_logits=False`` (a training step's): the masked-LM loss without its logits,
        through ``linear_cross_entropy`` where it applies (a CPU, or eager fp32; some masked
        token)."""
        B, T = input_ids.shape
        if masked_lm_positions is None:  # every position, HF style
            masked_lm_positions = torch.arange(T, device=input_ids.device).expand(B, T)
        # The last layer and the heads only see [CLS] (for NSP) and the masked positions.
        rows = torch.cat([masked_lm_positions.new_zeros(B, 1), masked_lm_positions], dim=1)
        hidden, pooled_output = self.bert(input_ids, token_type_ids, attention_mask, rows)
        masked_hidden = hidden[:, 1:]  # [B, P, H]
        if masked_lm_labels is not None:
            if not return_logits and torch.compiler.is_compiling():
                # A compiled training step keeps every slot (the loss ignores the unused ones):
                # selecting the used rows has a data-dependent shape and breaks the graph.
                masked_hidden, targets = masked_hidden.flatten(0, 1), masked_lm_labels.flatten()
            else:
                keep = masked_lm_labels != IGNORE_INDEX
                masked_hidden = masked_hidden[keep]  # [N, H]
                targets = masked_lm_labels[keep]
        seq_relationship_logits = self.cls.seq_relationship(pooled_output)
        # On a GPU, autocast and torch.compile keep the plain head (the fused one is unmeasured).
        device = input_ids.device.type
        fused = (
            not return_logits
            and masked_lm_labels is not None
            and targets.numel() > 0
            and self.cls.predictions.bias.dtype == torch.float32
            and (
                device == "cpu"
                or not (torch.is_autocast_enabled(device) or torch.compiler.is_compiling())
            )
        )
        prediction_logits = None
        mlm_loss = nsp_loss = loss = None
        if fused:
            head = self.cls.predictions
            mlm_loss = linear_cross_entropy(
                head.transform(masked_hidden), head.decoder.weight, head.bias, targets
            )
        else:
            prediction_logits = self.cls.predictions(masked_hidden)
            if masked_lm_labels is not None:  # the mean over the masked tokens; 0 if none
                mlm_loss = F.cross_entropy(
                    prediction_logits.float(), targets, ignore_index=IGNORE_INDEX, reduction="sum"
                ) / (targets != IGNORE_INDEX).sum().clamp(min=1)
        if masked_lm_labels is not None:
            loss = mlm_loss
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(
                seq_relationship_logits.float(), next_sentence_label.view(-1)
            )
            loss = nsp_loss if loss is None else loss + nsp_loss
        return BertPreTrainingOutput(
            loss, mlm_loss, nsp_loss, prediction_logits, seq_relationship_logits
        )


# ---------------------------------------------------------------------------- fine-tuning


def masked_mean(sequence_output: Tensor, attention_mask: Tensor | None) -> Tensor:
    """[B, T, H] -> [B, H]: the mean over the positions the mask keeps (all without a mask)."""
    if attention_mask is None:
        return sequence_output.mean(1)
    keep = attention_mask.unsqueeze(-1).to(sequence_output.dtype)
    return (sequence_output * keep).sum(1) / keep.sum(1).clamp(min=1)


def last_token(sequence_output: Tensor, attention_mask: Tensor | None) -> Tensor:
    """[B, T, H] -> [B, H]: the hidden state of each row's last unpadded position."""
    B, T, H = sequence_output.shape
    last = torch.full((B,), T - 1, device=sequence_output.device)
    if attention_mask is not None:
        last = attention_mask.sum(1).clamp(min=1) - 1
    return sequence_output.gather(1, last.view(B, 1, 1).expand(B, 1, H)).squeeze(1)


class HeadLSTM(nn.Module):
    """A one-layer BiLSTM over the encoder's output (the paper's "+ BiLSTM", `head_lstm_size`
    per direction): per token [B, T, 2W], and a sequence's summary, the final state of each
    direction [B, 2W] (forward at the last unpadded token, backward at the first)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        size = config.head_lstm_size
        self.lstm = nn.LSTM(config.hidden_size, size, batch_first=True, bidirectional=True)

    def forward(self, x: Tensor, attention_mask: Tensor | None) -> tuple[Tensor, Tensor]:
        lengths = torch.full((x.shape[0],), x.shape[1])
        if attention_mask is not None:
            lengths = attention_mask.sum(1).clamp(min=1).cpu()
        # float32 whatever the autocast: torch's autocast runs a cuDNN LSTM in float16 even under
        # bf16-mixed, which has no loss scaling to keep float16 gradients from underflowing
        with torch.autocast(x.device.type, enabled=False):
            packed = pack_padded_sequence(
                x.float(), lengths, batch_first=True, enforce_sorted=False
            )
            out, (final, _) = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return out, torch.cat([final[0], final[1]], dim=-1)


def head_width(config: BertConfig) -> int:
    """What a task head reads per token or sequence: the encoder's width, or the BiLSTM's."""
    return config.hidden_size if config.head_lstm_size is None else 2 * config.head_lstm_size


class BertClassifierBase(BertPreTrainedModel):
    """The encoder plus dropout and one new linear layer (`classifier`), HF's names and init;
    with `head_lstm_size`, a BiLSTM between them (`head_lstm`)."""

    pooled = True  # a sequence head (pooler unless classifier_pooling "mean") or every token

    def __init__(self, config: BertConfig, num_labels: int = 2):
        super().__init__()
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.config = config
        self.num_labels = num_labels
        lstm = config.head_lstm_size is not None
        pooler = self.pooled and config.classifier_pooling == "cls" and not lstm
        if pooler and config.is_decoder:
            raise ValueError(
                "classifier_pooling 'cls' reads [CLS], which a left-to-right encoder "
                "(is_decoder) lets see only itself: set the task's classifier_pooling parameter "
                "to last (GPT's reading) or mean, or give it a BiLSTM head (head_lstm_size)"
            )
        self.bert = BertModel(config, add_pooling_layer=pooler)
        self.head_lstm = HeadLSTM(config) if lstm else None
        p = config.classifier_dropout
        self.dropout = nn.Dropout(config.hidden_dropout_prob if p is None else p)
        self.classifier = nn.Linear(head_width(config), num_labels)
        self.apply(self._init_weights)

    def summary(
        self, sequence_output: Tensor, pooled_output: Tensor | None, attention_mask: Tensor | None
    ) -> Tensor:
        """What a sequence head reads: the BiLSTM's final states, else the pooled [CLS], the
        mean of the last layer or its last token (`classifier_pooling`)."""
        if self.head_lstm is not None:
            return self.head_lstm(sequence_output, attention_mask)[1]
        if pooled_output is not None:
            return pooled_output
        if self.config.classifier_pooling == "last":
            return last_token(sequence_output, attention_mask)
        return masked_mean(sequence_output, attention_mask)

    def tokens(self, sequence_output: Tensor, attention_mask: Tensor | None) -> Tensor:
        """What a per-token head reads: the last layer, or the BiLSTM over it."""
        if self.head_lstm is None:
            return sequence_output
        return self.head_lstm(sequence_output, attention_mask)[0]


class BertForSequenceClassification(BertClassifierBase):
    """pooled_output -> dropout -> linear; num_labels == 1 is regression (MSE), else CE.

    `config.classifier_pooling` "mean" or "last" reads the masked mean or the last token of the
    last layer instead of the pooled [CLS] (no pooler then); see `summary`.
    """

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor | None, Tensor]:
        sequence_output, pooled_output = self.bert(input_ids, token_type_ids, attention_mask)
        summary = self.summary(sequence_output, pooled_output, attention_mask)
        logits = self.classifier(self.dropout(summary))
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = F.mse_loss(logits.squeeze(-1).float(), labels.view(-1).float())
            else:
                loss = F.cross_entropy(logits.float(), labels.view(-1))
        return loss, logits


class BertForTokenClassification(BertClassifierBase):
    """sequence_output -> dropout -> linear per token; labels IGNORE_INDEX are ignored (later
    sub-tokens, [CLS], [SEP], padding), so only each word's first sub-token is trained, as in
    the paper."""

    pooled = False

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor | None, Tensor]:
        sequence_output, _ = self.bert(input_ids, token_type_ids, attention_mask)
        logits = self.classifier(self.dropout(self.tokens(sequence_output, attention_mask)))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits.float().view(-1, self.num_labels), labels.view(-1), ignore_index=IGNORE_INDEX
            )
        return loss, logits


class BertForMultipleChoice(BertClassifierBase):
    """The paper's SWAG model (4.4): every choice's pair goes through BERT and one learned vector
    (`classifier`, a single output) scores its pooled [CLS]; a softmax over the choices.

    Inputs are [batch, choices, tokens]; the logits [batch, choices]; HF's names and layout.
    """

    def __init__(self, config: BertConfig):
        super().__init__(config, num_labels=1)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor | None, Tensor]:
        batch, choices, width = input_ids.shape

        def rows(x: Tensor | None) -> Tensor | None:  # one row per (example, choice)
            return None if x is None else x.reshape(batch * choices, width)

        mask = rows(attention_mask)
        sequence_output, pooled_output = self.bert(rows(input_ids), rows(token_type_ids), mask)
        summary = self.summary(sequence_output, pooled_output, mask)
        logits = self.classifier(self.dropout(summary)).view(batch, choices)
        loss = None if labels is None else F.cross_entropy(logits.float(), labels.view(-1))
        return loss, logits


class BertForQuestionAnswering(BertPreTrainedModel):
    """sequence_output -> linear to (start, end) logits per token, as HF's (`qa_outputs`); with
    `head_lstm_size`, through a BiLSTM first.

    With start and end positions the loss is the mean of the two cross-entropies; positions
    outside the sequence (an answer cut off by truncation) are clamped to it and ignored, as HF.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.head_lstm = None if config.head_lstm_size is None else HeadLSTM(config)
        self.qa_outputs = nn.Linear(head_width(config), 2)
        self.apply(self._init_weights)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        start_positions: Tensor | None = None,
        end_positions: Tensor | None = None,
    ) -> tuple[Tensor | None, Tensor, Tensor]:
        sequence_output, _ = self.bert(input_ids, token_type_ids, attention_mask)
        if self.head_lstm is not None:
            sequence_output = self.head_lstm(sequence_output, attention_mask)[0]
        start_logits, end_logits = self.qa_outputs(sequence_output).float().unbind(-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            width = start_logits.shape[1]
            start = start_positions.clamp(0, width)
            end = end_positions.clamp(0, width)
            loss = (
                F.cross_entropy(start_logits, start, ignore_index=width)
                + F.cross_entropy(end_logits, end, ignore_index=width)
            ) / 2
        return loss, start_logits, end_logits


def num_parameters(model: nn.Module) -> int:
    """Distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())
