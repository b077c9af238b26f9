"""BERT's masking rule, one definition for the static example creator and the dynamic collator.

How many tokens a sequence predicts, which of them with whole-word masking, and what each
predicted token becomes (google's `create_masked_lm_predictions`): 80% [MASK], 10% a random
vocabulary id, 10% unchanged.
"""

from __future__ import annotations

import numpy as np

MASK_SHARE, KEEP_SHARE = 0.8, 0.1  # the rest becomes a random id
MASKED_LM_PROB, MAX_PREDICTIONS_PER_SEQ = 0.15, 20  # google's flags (20 of 128 tokens)

# Where an example's masks are drawn: once, with the examples, or per batch by the collator
STATIC, DYNAMIC = "static", "dynamic"
EXAMPLE_MASKING = (STATIC, DYNAMIC)


def masking_rules(masked_lm_prob: float, max_predictions_per_seq: int) -> tuple:
    """`(name, ok, why)` per masking parameter, for the example config and the collator."""
    return (
        ("masked_lm_prob", 0.0 < masked_lm_prob < 1.0, "must be in (0, 1)"),
        ("max_predictions_per_seq", max_predictions_per_seq >= 1, "must be >= 1"),
    )


def num_to_predict(
    lengths: np.ndarray, masked_lm_prob: float, max_predictions_per_seq: int
) -> np.ndarray:
    """`min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))` per row."""
    n = np.round(np.asarray(lengths) * masked_lm_prob).astype(np.int64)
    return np.minimum(np.maximum(n, 1), max_predictions_per_seq)


def corrupt(
    original: np.ndarray, draw: np.ndarray, random_ids: np.ndarray, mask_id: int
) -> np.ndarray:
    """The inputs at the predicted positions; `draw` ~ U[0, 1) and `random_ids` one per position."""
    new = original.copy()
    new[draw < MASK_SHARE] = mask_id
    use_random = draw >= MASK_SHARE + KEEP_SHARE
    new[use_random] = random_ids[use_random]
    return new


def word_starts(ids: np.ndarray, maskable: np.ndarray, continuation: np.ndarray) -> np.ndarray:
    """[N, T] True where a whole-word candidate starts: a maskable token that is not a `##` piece
    right after another maskable one (a `##` after [SEP] starts a word; google glues it to the
    [SEP], which is never masked). `continuation`: bool per vocabulary id."""
    prev = np.zeros_like(maskable)
    prev[:, 1:] = maskable[:, :-1]
    return maskable & ~(continuation[ids] & prev)


def take_whole_words(
    is_start: np.ndarray, maskable: np.ndarray, scores: np.ndarray, n_predict: np.ndarray
) -> np.ndarray:
    """[N, T] the tokens of the words taken, visiting each row's words in the order of `scores`
    ([N, G] uniform, G at least the most words of a row) and taking a word while its pieces
    still fit into `n_predict` tokens (google skips a word too long for what is left)."""
    n_words = is_start.sum(axis=1)
    g_max = scores.shape[1]
    valid = np.arange(g_max)[None, :] < n_words[:, None]
    scores = np.where(valid, scores, np.inf)
    word = np.cumsum(is_start, axis=1) - 1
    order = np.argsort(scores, axis=1, kind="stable")
    cell = (np.arange(len(scores))[:, None] * g_max + word)[maskable]
    sizes = np.bincount(cell, minlength=scores.size).reshape(scores.shape)
    taken = _take_in_order(sizes, order, valid, n_predict)
    return maskable & np.take_along_axis(taken, np.maximum(word, 0), axis=1)


def _take_in_order(
    sizes: np.ndarray, order: np.ndarray, valid: np.ndarray, n_predict: np.ndarray
) -> np.ndarray:
    """[N, G] candidates taken when visited in `order`, each while its size still fits."""
    size_p = np.take_along_axis(sizes, order, axis=1)
    active = np.take_along_axis(valid, order, axis=1)
    taken_p = np.zeros_like(active)
    count = np.zeros(len(sizes), dtype=np.int64)
    while True:
        # a candidate larger than the budget left can never be taken (google skips it)
        active &= size_p <= (n_predict - count)[:, None]
        if not active.any():
            break
        reach = count[:, None] + np.cumsum(np.where(active, size_p, 0), axis=1)
        take = active & (reach <= n_predict[:, None])  # the prefix that fits, in visiting order
        taken_p |= take
        count += np.where(take, size_p, 0).sum(axis=1)
        active &= ~take
    taken = np.zeros_like(taken_p)
    np.put_along_axis(taken, order, taken_p, axis=1)
    return taken
