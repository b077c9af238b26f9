"""Measured statistics of a pretraining examples table (for the report and for tests)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bert_pipeline.data.examples import ExampleConfig, Vocab


def _np(a) -> np.ndarray:
    return a.to_numpy(zero_copy_only=False) if hasattr(a, "to_numpy") else np.asarray(a)


_SUMS = (
    "n_examples",
    "n_documents",
    "n_tokens",
    "n_full_length",
    "n_is_next",
    "n_masked_tokens",
    "n_maskable_tokens",
    "n_masked_uncapped",
    "n_maskable_uncapped",
    "n_cap_bound",
    "n_shown_mask",
    "n_shown_kept",
    "n_truncated_tokens",
)


def partial_statistics(table: pa.Table, cfg: ExampleConfig, vocab: Vocab) -> dict[str, Any]:
    """Sums and the length histogram of one shard, JSON-ready (the examples' manifest keeps
    them); `merge_statistics` turns shards into rates."""
    ids_col = table.column("input_ids").combine_chunks()
    lengths = _np(pc.list_value_length(ids_col)).astype(np.int64)
    labels = _np(table.column("next_sentence_label")).astype(np.int64)
    edges = list(range(0, cfg.max_seq_length + 8, 8))
    out: dict[str, Any] = dict.fromkeys(_SUMS, 0)
    out.update(
        n_examples=len(lengths),
        n_tokens=int(lengths.sum()),
        n_full_length=int((lengths == cfg.max_seq_length).sum()),
        n_is_next=int((labels == 0).sum()),
        histogram=np.histogram(lengths, bins=edges)[0].tolist(),
        # shards hold disjoint documents, so per-shard counts add up
        n_documents=pc.count_distinct(table.column("a_doc_id")).as_py(),
    )
    if "a_truncated_tokens" in table.column_names:
        out.update(_truncation(table))
    if cfg.dynamic_masking or not len(lengths):
        return out
    pos_col = table.column("masked_lm_positions").combine_chunks()
    n_masked = _np(pc.list_value_length(pos_col)).astype(np.int64)
    maskable = lengths - 3
    uncapped = n_masked < cfg.max_predictions_per_seq
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    rows = _np(pc.list_parent_indices(pos_col))
    positions = _np(pc.list_flatten(pos_col)).astype(np.int64)
    shown = _np(pc.list_flatten(ids_col))[offsets[rows] + positions]
    original = _np(pc.list_flatten(table.column("masked_lm_ids").combine_chunks()))
    is_mask = shown == vocab.mask_id
    out.update(
        n_masked_tokens=int(n_masked.sum()),
        n_maskable_tokens=int(maskable.sum()),
        n_masked_uncapped=int(n_masked[uncapped].sum()),
        n_maskable_uncapped=int(maskable[uncapped].sum()),
        n_cap_bound=int((~uncapped).sum()),
        n_shown_mask=int(is_mask.sum()),
        n_shown_kept=int((~is_mask & (shown == original)).sum()),
    )
    return out


def _truncation(table: pa.Table) -> dict[str, Any]:
    """Tokens cut by truncation, and the document that lost the most in one example: the side
    (A or B) that was cut, since a too-long document is as often a random B as an A."""
    cut = {s: _np(table.column(f"{s}_truncated_tokens")).astype(np.int64) for s in "ab"}
    out: dict[str, Any] = {"n_truncated_tokens": int(cut["a"].sum() + cut["b"].sum())}
    most = np.maximum(cut["a"], cut["b"])
    if most.any():
        worst = int(most.argmax())
        side = "a" if cut["a"][worst] >= cut["b"][worst] else "b"
        out["worst_truncated"] = [table.column(f"{side}_doc_id")[worst].as_py(), int(most[worst])]
    return out


def merge_statistics(parts: list[dict[str, Any]], cfg: ExampleConfig) -> dict[str, Any]:
    """Counts, mask rates, 80/10/10 split, IsNext rate and length histogram, all measured.

    `selected_rate_uncapped` is selected / maskable tokens over examples whose prediction count
    is below `max_predictions_per_seq` (where the cap binds the rate is lower by design).
    Maskable = real tokens except [CLS] and the two [SEP].
    """
    t = {k: sum(p[k] for p in parts) for k in _SUMS}
    n = t["n_examples"]
    edges = list(range(0, cfg.max_seq_length + 8, 8))
    stats: dict[str, Any] = {
        "n_examples": int(n),
        "n_documents": int(t["n_documents"]),
        "n_tokens": int(t["n_tokens"]),
        "mean_length": t["n_tokens"] / n if n else 0.0,
        "full_length_rate": t["n_full_length"] / n if n else 0.0,
        "is_next_rate": t["n_is_next"] / n if n else 0.0,
        "length_histogram": {
            "bin_edges": edges,
            "counts": np.sum([p["histogram"] for p in parts], axis=0).tolist(),
        },
        "masking": cfg.masking,
        "n_shards": len(parts),
        # share of the A/B sentence tokens cut by truncation (google cuts the longer segment)
        "truncated_share": t["n_truncated_tokens"]
        / max(1, t["n_truncated_tokens"] + t["n_tokens"] - 3 * n),
        "warnings": truncation_warnings(parts, cfg),
    }
    if cfg.dynamic_masking or n == 0:
        return stats
    shown = max(1, t["n_masked_tokens"])
    stats.update(
        {
            "n_masked_tokens": int(t["n_masked_tokens"]),
            "n_maskable_tokens": int(t["n_maskable_tokens"]),
            "selected_rate": t["n_masked_tokens"] / max(1, t["n_maskable_tokens"]),
            "selected_rate_uncapped": t["n_masked_uncapped"] / max(1, t["n_maskable_uncapped"]),
            "cap_bound_rate": t["n_cap_bound"] / n,
            "mask_token_rate": t["n_shown_mask"] / shown,
            "kept_rate": t["n_shown_kept"] / shown,
            "random_token_rate": (shown - t["n_shown_mask"] - t["n_shown_kept"]) / shown,
        }
    )
    return stats


def truncation_warnings(parts: list[dict[str, Any]], cfg: ExampleConfig) -> list[str]:
    """One line per shard that lost more than `warn_truncated_share` of its segment tokens."""
    lines = []
    for shard, p in enumerate(parts):
        content = p["n_tokens"] - 3 * p["n_examples"]
        share = p["n_truncated_tokens"] / max(1, p["n_truncated_tokens"] + content)
        if share > cfg.warn_truncated_share:
            doc, cut = p["worst_truncated"]
            lines.append(
                f"shard {shard}: truncation dropped {share:.0%} of the segment tokens (document "
                f"{doc!r} lost {cut} tokens in one example): text without sentence boundaries? "
                "(pretrain_data.examples.warn_truncated_share)"
            )
    return lines


def example_statistics(table: pa.Table, cfg: ExampleConfig, vocab: Vocab) -> dict[str, Any]:
    """Statistics of one in-memory examples table, merged as the report merges its shards."""
    return merge_statistics([partial_statistics(table, cfg, vocab)], cfg)


# The run-level figures of the report, logged as the MLflow run's parameters: constants of the
# run, which as metrics would each draw a one-point chart.
SUMMARY_KEYS = (
    "truncated_share",
    "n_warnings",
    "n_examples",
    "n_documents",
    "n_tokens",
    "mean_length",
    "is_next_rate",
    "selected_rate",
    "selected_rate_uncapped",
    "mask_token_rate",
    "kept_rate",
    "random_token_rate",
)


def summary(stats: dict[str, Any]) -> dict[str, float]:
    """The report's run-level figures (`SUMMARY_KEYS`), for the run's parameters."""
    return {k: stats[k] for k in SUMMARY_KEYS if k in stats}
