"""BERT pretraining examples, following google-research/bert `create_pretraining_data.py`.

Per document and dupe pass the sequential part of google's algorithm (chunking whole sentences up
to `target_seq_length`, shortened with probability `short_seq_prob`; segment A = a random number of
leading chunk sentences; 50% random next from another document with the unused sentences put back;
`truncate_seq_pair`) runs once per chunk, never per token. Masking (`create_masked_lm_predictions`)
is vectorized with numpy over all instances of a document.

A corpus is processed in shards of whole documents (`create_examples` gets one shard), as google's
script is used in practice, one process per input shard, and as NVIDIA's LDDL does: the random next
segment comes from another document of the same shard.

Randomness: every (shard, dupe pass) pair owns its streams, from
`SeedSequence([seed, shard, pass])`: Python's `random` for the per-chunk choices (as google's
script), numpy for truncation and masking over the whole pass. The result depends only on the
seed and the sharding, never on which worker runs a shard. Google's Python
`random` stream cannot be reproduced and is not attempted; the distributions are the same.
Deliberate differences from google, each because google's behaviour breaks an invariant this
project tests:
- the random next document is drawn uniformly among the *other* documents (google retries 10 times
  and may fall back to the same document, which happens 1 time in 1024 with two documents);
- whole-word masking treats a `##` token right after `[SEP]` as a word start (google glues it to
  the last word of segment A);
- truncation draws the number of tokens cut from the front as Binomial(cut, 0.5), which is exactly
  the distribution of google's one-coin-per-token loop.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from bert_pipeline.data.masking import (
    DYNAMIC,
    EXAMPLE_MASKING,
    MASKED_LM_PROB,
    MAX_PREDICTIONS_PER_SEQ,
    corrupt,
    masking_rules,
    num_to_predict,
    take_whole_words,
    word_starts,
)
from bert_pipeline.params import require

if TYPE_CHECKING:
    from bert_pipeline.data.tokenizer import WordIds

_SHUFFLE_KEY = 2**32 - 1  # SeedSequence key of the final shuffle; never a dupe pass index
SHARD_ID_STRIDE = 2**32  # example_id = shard * stride + position: unique across shards
# google's segments are whole sentences of a chunk (a chunk closes once it reaches
# max_seq_length - 3 tokens); the shortest sentence is a word and its end mark, 2 tokens. Below
# [CLS] + 2 + [SEP] + 2 + [SEP], truncate_seq_pair cuts every pair to fragments: no example holds
# two sentences, and with real text nearly every B is a random next.
MIN_SEQ_LENGTH = 7


@dataclass(frozen=True)
class ExampleConfig:
    """The `pretrain_data.examples` parameters (names as in google's flags)."""

    max_seq_length: int = 128
    short_seq_prob: float = 0.1
    masked_lm_prob: float = MASKED_LM_PROB
    max_predictions_per_seq: int = MAX_PREDICTIONS_PER_SEQ
    dupe_factor: int = 10
    whole_word_mask: bool = False
    masking: str = "static"  # static: masks drawn here; dynamic: by the collator per batch
    # false: the paper's "No NSP" ablation, B always continues A in the same document
    next_sentence: bool = True
    # with next_sentence: the label-1 pair is the chunk's own two segments swapped (ALBERT's
    # sentence-order prediction) instead of A and a random document's B
    sentence_order: bool = False
    seed: int = 12345
    documents_per_shard: int = 2000  # a random B segment comes from the same shard
    # the report warns about a shard whose segments lose more than this share to truncation
    warn_truncated_share: float = 0.5

    @property
    def dynamic_masking(self) -> bool:
        return self.masking == DYNAMIC

    def check(self, root: str = "pretrain_data.examples") -> None:
        """Clear errors naming the parameter, before any work is done."""
        require(
            self.max_seq_length >= MIN_SEQ_LENGTH,
            root,
            "max_seq_length",
            f"is too small: [CLS] A [SEP] B [SEP] with a whole sentence in A and in B needs at "
            f"least {MIN_SEQ_LENGTH} tokens",
            self.max_seq_length,
        )
        for name, ok, why in (
            ("short_seq_prob", 0.0 <= self.short_seq_prob <= 1.0, "must be in [0, 1]"),
            *masking_rules(self.masked_lm_prob, self.max_predictions_per_seq),
            ("dupe_factor", self.dupe_factor >= 1, "must be >= 1"),
            ("seed", self.seed >= 0, "must be >= 0"),
            ("masking", self.masking in EXAMPLE_MASKING, "must be static or dynamic"),
        ):
            require(ok, root, name, why, getattr(self, name))
        require(
            self.documents_per_shard >= 2,
            root,
            "documents_per_shard",
            "must be >= 2 (B segments come from another document)",
            self.documents_per_shard,
        )
        require(
            self.next_sentence or not self.sentence_order,
            root,
            "sentence_order",
            "needs next_sentence=true: it changes which pairs the next-sentence task labels 1",
            self.sentence_order,
        )


@dataclass(frozen=True)
class Vocab:
    """What masking needs to know about the vocabulary."""

    size: int
    cls_id: int
    sep_id: int
    mask_id: int
    pad_id: int
    continuation: np.ndarray  # bool [size]: token starts with "##" (whole-word masking)


@dataclass
class Corpus:
    """Tokenized corpus in flat arrays: sentence s of document d owns tokens
    `tokens[sent_start[s]:sent_start[s + 1]]`; document d owns sentences
    `doc_start[d]:doc_start[d + 1]` (only non-empty sentences are kept, as google)."""

    tokens: np.ndarray  # int32 [n_tokens]
    sent_start: np.ndarray  # int64 [n_sent + 1]
    sent_index: np.ndarray  # int32 [n_sent], the sentence_index of the source table
    doc_start: np.ndarray  # int64 [n_docs + 1]
    doc_ids: list[str]

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)


def build_corpus(
    doc_ids: Sequence[str], sentence_index: np.ndarray, tokens: np.ndarray, lengths: np.ndarray
) -> Corpus:
    """The corpus of `tokenize_sentences`' output (every sentence's ids, concatenated, and their
    counts); drops sentences without tokens and then empty documents.

    Rows must be grouped by document, in sentence order (as the `sentences` table is).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    keep = lengths > 0
    tokens = np.asarray(tokens, dtype=np.int32)
    if lengths.sum() != len(tokens):
        raise ValueError(f"{len(tokens)} token ids for sentences of {lengths.sum()} tokens")
    doc_arr = np.asarray(doc_ids, dtype=object)[keep]
    lengths = lengths[keep]
    sent_start = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=sent_start[1:])
    if len(doc_arr):
        change = np.flatnonzero(doc_arr[1:] != doc_arr[:-1]) + 1
        starts = np.concatenate([[0], change, [len(doc_arr)]]).astype(np.int64)
    else:
        starts = np.zeros(1, dtype=np.int64)
    ids = [str(doc_arr[i]) for i in starts[:-1]]
    if len(set(ids)) != len(ids):
        raise ValueError("sentences are not grouped by doc_id (a document appears twice)")
    return Corpus(
        tokens=tokens,
        sent_start=sent_start,
        sent_index=np.asarray(sentence_index, dtype=np.int32)[keep],
        doc_start=starts,
        doc_ids=ids,
    )


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of `arange(s, s + n)` for each (s, n), without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total)


def _truncated_lengths(la: np.ndarray, lb: np.ndarray, max_tokens: int):
    """Final lengths of google's `truncate_seq_pair` (always trims the longer side, B on ties)."""
    excess = np.maximum(la + lb - max_tokens, 0)
    diff = np.abs(la - lb)
    first = np.minimum(excess, diff)  # from the longer side until both are equal
    rest = excess - first  # then alternately, B first
    cut_a = np.where(la > lb, first, 0) + rest // 2
    cut_b = np.where(la > lb, 0, first) + rest - rest // 2
    return la - cut_a, lb - cut_b


def _document_structure(
    d: int, cfg: ExampleConfig, rng: random.Random, starts: list[int], doc_start: list[int]
) -> list[tuple[int, ...]]:
    """google's `create_instances_from_document` up to (not including) masking.

    Returns rows of (a_doc, a_s0, a_s1, b_doc, b_s0, b_s1, is_random_next) with sentence indices
    into the flat corpus arrays (`starts` and `doc_start` are `corpus.sent_start` and
    `corpus.doc_start` as lists: plain Python ints and Python's `random`, as google's loop, are
    what make this per-chunk loop cheap). google adds sentences one by one until the chunk
    reaches `target` tokens; a bisection over the token offsets finds the same end at once.
    `below(n)` is the uniform draw in [0, n) that `randint` and `randrange` make (the same
    stream of numbers, without their argument checks, which cost more than the loop).
    """
    below = rng._randbelow
    s_lo, s_hi = doc_start[d], doc_start[d + 1]
    n_docs = len(doc_start) - 1
    max_num_tokens = cfg.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < cfg.short_seq_prob:
        target = 2 + below(max_num_tokens - 1)  # randint(2, max_num_tokens)
    out = []
    chunk_start = s_lo
    while chunk_start < s_hi:
        # last sentence of the chunk: the first whose end reaches target, else the document's last
        i = bisect.bisect_left(starts, starts[chunk_start] + target, chunk_start + 1, s_hi) - 1
        n_chunk = i + 1 - chunk_start
        a_end = 1 if n_chunk < 2 else 1 + below(n_chunk - 1)  # randint(1, n_chunk - 1)
        a_s0, a_s1 = chunk_start, chunk_start + a_end
        if not cfg.next_sentence or cfg.sentence_order:
            # Both segments from the chunk: "No NSP" (the paper's ablation, RoBERTa's
            # DOC-SENTENCES) keeps their order; ALBERT's sentence order swaps half, so the task
            # is coherence, not topic. A one-sentence chunk cannot be split, dropped.
            if n_chunk > 1:
                a, b = (a_s0, a_s1), (a_s1, i + 1)
                swapped = cfg.sentence_order and rng.random() < 0.5
                if swapped:
                    a, b = b, a
                out.append((d, *a, d, *b, int(swapped)))
        elif n_chunk == 1 or rng.random() < 0.5:
            target_b = target - (starts[a_s1] - starts[a_s0])
            r = below(n_docs - 1)
            r += r >= d
            r_lo, r_hi = doc_start[r], doc_start[r + 1]
            b_s0 = r_lo + below(r_hi - r_lo)  # randrange(r_lo, r_hi)
            # first sentence end where B reaches target_b tokens (at least one sentence)
            b_s1 = bisect.bisect_left(starts, starts[b_s0] + max(target_b, 1))
            b_s1 = min(max(b_s1, b_s0 + 1), r_hi)
            out.append((d, a_s0, a_s1, r, b_s0, b_s1, 1))
            i = a_s1 - 1  # put the unused sentences back
        else:
            out.append((d, a_s0, a_s1, d, a_s1, i + 1, 0))
        chunk_start = i + 1
    return out


_MASK_ROWS = 4096  # rows masked at a time: the block's score and order arrays stay in cache


def _mask(
    ids: np.ndarray, lengths: np.ndarray, cfg: ExampleConfig, vocab: Vocab, rng
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """google's `create_masked_lm_predictions` for a [N, T] padded batch, in place.

    Returns the (row, column) of each predicted token, row by row, and its original id.
    Candidates are all real tokens except [CLS]/[SEP] (google masks [UNK] too); with whole-word
    masking a word and its `##` pieces form one candidate. Candidates are visited in random order
    and taken when they still fit into `num_to_predict = min(cap, max(1, round(len *
    masked_lm_prob)))` tokens. The visiting order is drawn for all rows as one [N, G] block of
    uniform scores, consumed `_MASK_ROWS` rows at a time (the same numbers in the same order).
    """
    n, width = ids.shape
    real = np.arange(width)[None, :] < lengths[:, None]
    maskable = real & (ids != vocab.cls_id) & (ids != vocab.sep_id)
    is_start = word_starts(ids, maskable, vocab.continuation) if cfg.whole_word_mask else maskable
    n_groups = is_start.sum(axis=1)
    g_max = max(1, int(n_groups.max()))
    n_predict = num_to_predict(lengths, cfg.masked_lm_prob, cfg.max_predictions_per_seq)

    selected = np.zeros_like(maskable)
    for lo in range(0, n, _MASK_ROWS):
        rows = slice(lo, min(n, lo + _MASK_ROWS))
        scores = rng.random((rows.stop - lo, g_max))
        if cfg.whole_word_mask:
            selected[rows] = take_whole_words(
                is_start[rows], maskable[rows], scores, n_predict[rows]
            )
        else:
            valid = np.arange(g_max)[None, :] < n_groups[rows, None]
            scores[~valid] = np.inf
            # a candidate is a token: the k-th candidate of a row is its k-th maskable token
            taken = _first_visited(scores, n_predict[rows])
            block = selected[rows]
            block[maskable[rows]] = taken[valid]

    # row-major positions, as np.nonzero's, which is ~4x slower on a 2-D array
    r, c = np.divmod(np.flatnonzero(selected), width)
    original = ids[r, c]
    draw = rng.random(len(r))
    random_ids = rng.integers(0, vocab.size, len(r))
    ids[r, c] = corrupt(original, draw, random_ids, vocab.mask_id)
    return r, c, original


def _first_visited(scores: np.ndarray, n_predict: np.ndarray) -> np.ndarray:
    """[N, G] True for the `n_predict` lowest scores of each row: the candidates visited first
    when one token fits per candidate. A row's cut is its `n_predict`-th lowest score, found by
    a partial sort of its `max(n_predict)` lowest values (no index arrays); the same choice as
    visiting in full order unless two uniform doubles of a row are equal. Where a row has fewer
    candidates than `n_predict`, the cut is inf and the invalid (inf) cells are True too: the
    caller reads only the valid ones."""
    n, g_max = scores.shape
    k = min(g_max, int(n_predict.max()))
    lowest = np.partition(scores, k - 1, axis=1)[:, :k] if k < g_max else scores
    cut = np.sort(lowest, axis=1)[np.arange(n), np.minimum(n_predict, k) - 1]
    return scores <= cut[:, None]


def _pass_examples(corpus: Corpus, dupe: int, cfg: ExampleConfig, vocab: Vocab, shard: int):
    """All instances of dupe pass `dupe` over the shard's documents, as arrays (the token ids
    padded to [N, max_seq_length], with the masked positions and their original ids).

    The sequential part runs document by document; truncation and masking run once over every
    instance of the pass (numpy), never per document.
    """
    seed = np.random.SeedSequence([cfg.seed, shard, dupe])
    py_rng = random.Random(int(seed.generate_state(1, np.uint64)[0]))
    rng = np.random.default_rng(seed)
    starts_list, doc_start = corpus.sent_start.tolist(), corpus.doc_start.tolist()
    struct = [
        row
        for d in range(corpus.n_docs)
        for row in _document_structure(d, cfg, py_rng, starts_list, doc_start)
    ]
    if not struct:
        return None
    s = np.asarray(struct, dtype=np.int64)
    a_doc, a_s0, a_s1, b_doc, b_s0, b_s1, is_random = s.T
    starts = corpus.sent_start
    a_tok0, a_tok1 = starts[a_s0], starts[a_s1]
    b_tok0, b_tok1 = starts[b_s0], starts[b_s1]
    la, lb = a_tok1 - a_tok0, b_tok1 - b_tok0
    new_la, new_lb = _truncated_lengths(la, lb, cfg.max_seq_length - 3)
    front_a = rng.binomial(la - new_la, 0.5)
    front_b = rng.binomial(lb - new_lb, 0.5)
    a_tok0, b_tok0 = a_tok0 + front_a, b_tok0 + front_b

    n = len(s)
    lengths = new_la + new_lb + 3
    ids = np.full((n, cfg.max_seq_length), vocab.pad_id, dtype=np.int32)
    ids[:, 0] = vocab.cls_id
    rows = np.arange(n)
    ids[rows, new_la + 1] = vocab.sep_id
    ids[rows, lengths - 1] = vocab.sep_id
    row_start = rows * cfg.max_seq_length  # A and B by flat position: no row index per token
    flat = ids.reshape(-1)
    flat[_ranges(row_start + 1, new_la)] = corpus.tokens[_ranges(a_tok0, new_la)]
    flat[_ranges(row_start + new_la + 2, new_lb)] = corpus.tokens[_ranges(b_tok0, new_lb)]

    if cfg.dynamic_masking:
        m_rows = m_cols = masked_ids = np.zeros(0, dtype=np.int64)
    else:
        m_rows, m_cols, masked_ids = _mask(ids, lengths, cfg, vocab, rng)
    return {
        "ids": ids,
        "masked_positions": m_cols.astype(np.int32),
        "masked_ids": masked_ids.astype(np.int32),
        "n_masked": np.bincount(m_rows, minlength=n),
        "lengths": lengths,
        "len_a": new_la,
        "label": is_random.astype(np.int8),
        "a_truncated": (la - new_la).astype(np.int32),
        "b_truncated": (lb - new_lb).astype(np.int32),
        "a_doc": a_doc,
        "b_doc": b_doc,
        "a_sent": np.stack([a_s0, a_s1], axis=1),
        "b_sent": np.stack([b_s0, b_s1], axis=1),
    }


def _concat(parts: list[dict]) -> dict:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def create_examples(
    corpus: Corpus, cfg: ExampleConfig, vocab: Vocab, shard: int = 0, progress: bool = True
) -> pa.Table:
    """All pretraining examples of one shard of documents, shuffled, as an Arrow table.

    google's `create_training_instances`: `dupe_factor` passes over the documents, every
    document's instances, then one shuffle.
    """
    cfg.check()
    if corpus.n_docs == 0:
        raise ValueError(f"shard {shard}: no documents with tokens, nothing to build examples from")
    if corpus.n_docs < 2:
        raise ValueError(
            f"shard {shard}: only one document ({corpus.doc_ids[0]!r}): next-sentence prediction "
            "needs a random next segment from a different document; supply at least 2 documents"
        )
    from tqdm.auto import tqdm

    parts = []
    for dupe in tqdm(range(cfg.dupe_factor), desc="create_examples", disable=not progress):
        part = _pass_examples(corpus, dupe, cfg, vocab, shard)
        if part is not None:
            parts.append(part)
    if not parts:
        raise ValueError(f"shard {shard}: the documents produced no examples")
    return _to_table(_concat(parts), corpus, cfg, shard)


def _to_table(x: dict, corpus: Corpus, cfg: ExampleConfig, shard: int) -> pa.Table:
    n = len(x["lengths"])
    shuffle = np.random.SeedSequence([cfg.seed, _SHUFFLE_KEY, shard])
    perm = np.random.default_rng(shuffle).permutation(n)
    # rows are shuffled while padded (a row copy each), then the padding is dropped
    lengths = x["lengths"][perm]
    column = np.arange(cfg.max_seq_length)[None, :]
    real = column < lengths[:, None]
    input_ids = x["ids"][perm][real]
    # token types: len_a + 2 zeros ([CLS] A [SEP]), then ones (B [SEP]), per row
    zeros = x["len_a"][perm] + 2
    runs = np.stack([zeros, lengths - zeros], axis=1).reshape(-1)
    types = np.repeat(np.tile(np.array([0, 1], dtype=np.int8), n), runs)
    new_off = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=new_off[1:])

    n_masked = x["n_masked"]
    m_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(n_masked, out=m_off[1:])
    m_idx = _ranges(m_off[perm], n_masked[perm])
    new_m_off = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(n_masked[perm], out=new_m_off[1:])

    def lists(values: np.ndarray, off: np.ndarray) -> pa.ListArray:
        return pa.ListArray.from_arrays(pa.array(off, pa.int32()), pa.array(values))

    doc_ids = pa.array(corpus.doc_ids, pa.string())
    a_sent, b_sent = x["a_sent"][perm], x["b_sent"][perm]
    si = corpus.sent_index

    def orig(s: np.ndarray, end: bool) -> np.ndarray:
        """Sentence-table index range (end exclusive) of flat sentence indices."""
        return (si[s - 1] + 1 if end else si[s]).astype(np.int32)

    return pa.table(
        {
            "example_id": pa.array(shard * SHARD_ID_STRIDE + np.arange(n, dtype=np.int64)),
            "input_ids": lists(input_ids, new_off),
            "token_type_ids": lists(types, new_off),
            "masked_lm_positions": lists(x["masked_positions"][m_idx], new_m_off),
            "masked_lm_ids": lists(x["masked_ids"][m_idx], new_m_off),
            "next_sentence_label": pa.array(x["label"][perm]),
            "a_doc_id": doc_ids.take(x["a_doc"][perm]),
            "b_doc_id": doc_ids.take(x["b_doc"][perm]),
            "a_sent_start": pa.array(orig(a_sent[:, 0], False)),
            "a_sent_end": pa.array(orig(a_sent[:, 1], True)),
            "b_sent_start": pa.array(orig(b_sent[:, 0], False)),
            "b_sent_end": pa.array(orig(b_sent[:, 1], True)),
            # tokens of the A and the B sentences cut by truncation: the report warns when many
            # are, naming the document that lost the most (either side may be the long one)
            "a_truncated_tokens": pa.array(x["a_truncated"][perm]),
            "b_truncated_tokens": pa.array(x["b_truncated"][perm]),
        }
    )


def vocab_from_tokenizer(tokenizer) -> Vocab:
    """Masking facts of a `tokenizers.Tokenizer` (special ids checked by `special_token_ids`)."""
    from bert_pipeline.data.tokenizer import CLS, MASK, PAD, SEP, special_token_ids

    ids = special_token_ids(tokenizer)
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    size = max(vocab.values()) + 1
    continuation = np.zeros(size, dtype=bool)
    continuation[[i for t, i in vocab.items() if t.startswith("##")]] = True
    return Vocab(
        size=size,
        cls_id=ids[CLS],
        sep_id=ids[SEP],
        mask_id=ids[MASK],
        pad_id=ids[PAD],
        continuation=continuation,
    )


def tokenize_sentences(
    tokenizer, texts: Sequence[str], known: WordIds | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of all sentences without special tokens, concatenated (int32), and the number
    of each sentence's tokens.

    A shard repeats tens of thousands of distinct words millions of times: each distinct word is
    tokenized once (by the tokenizer itself, or taken from `known`, the words this process
    tokenized before) and its ids are copied to every occurrence, which gives the tokenizer's own
    ids for the whole sentence (see `word_boundaries`).
    """
    from bert_pipeline.data.tokenizer import (
        encode_distinct,
        plain_wordpiece,
        split_words,
        word_boundaries,
    )

    bounds = word_boundaries(tokenizer)
    if bounds is None:
        return _tokenize_whole(tokenizer, texts)
    distinct, occurrences, offsets = split_words(texts, bounds)
    words = distinct.to_pylist()
    if known is None:
        ids, counts = encode_distinct(tokenizer, words, plain_wordpiece(tokenizer))
        starts = np.cumsum(counts) - counts
    else:
        ids, starts, counts = known.locate(tokenizer, words)
    per_occurrence = counts[occurrences]
    tokens = ids[_ranges(starts[occurrences], per_occurrence)]
    ends = np.zeros(len(occurrences) + 1, dtype=np.int64)
    np.cumsum(per_occurrence, out=ends[1:])
    return tokens, ends[offsets[1:]] - ends[offsets[:-1]]


def _tokenize_whole(tokenizer, texts: Sequence[str], batch_size: int = 10_000):
    """`tokenize_sentences` for a tokenizer whose words cannot be tokenized apart."""
    ids = [
        e.ids
        for i in range(0, len(texts), batch_size)
        for e in tokenizer.encode_batch_fast(
            list(texts[i : i + batch_size]), add_special_tokens=False
        )
    ]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    return np.fromiter(chain.from_iterable(ids), np.int32, int(lengths.sum())), lengths
