"""BERT's masking rule, one definition for the static example creator and the dynamic collator.

How many tokens a sequence predicts, and what each predicted token becomes (google's
`create_masked_lm_predictions`): 80% [MASK], 10% a random vocabulary id, 10% unchanged.
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
