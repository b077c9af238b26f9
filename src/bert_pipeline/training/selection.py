"""How a fine-tuning grid chooses: the one rule `finetune.refit` and the collectors
benchmarks/bert_tiny_comparison.py, holdout_noise.py and selection_rules.py share. Imports no ML
framework."""

from __future__ import annotations

import statistics

# Scores are float32: two rates with the same count of right answers can differ in the last bits
# of their means, which must not break a tie
TIE = 1e-6


def best_mean_rate(trials: list[dict]) -> list[dict]:
    """The trials of the (tag, learning rate) that scored best on average over its seeds (ties:
    the earlier): one lucky seed does not choose a rate. The tag is a further grid axis, such
    as a fine-tuning dropout rate ("" where there is none)."""
    if not trials:
        raise ValueError("no trials to choose a rate from")
    by_rate: dict[tuple[str, float], list[dict]] = {}
    for t in trials:
        by_rate.setdefault((t.get("tag", ""), t["learning_rate"]), []).append(t)
    best, best_mean = [], float("-inf")
    for group in by_rate.values():
        mean = statistics.fmean(t["best_score"] for t in group)
        if mean > best_mean + TIE:
            best, best_mean = group, mean
    return best
