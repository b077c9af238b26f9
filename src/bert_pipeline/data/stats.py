"""Measured statistics of a pretraining examples table (for the report and for tests)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bert_pipeline.data.examples import ExampleConfig, Vocab


def _np(a) -> np.ndarray:
    return a.to_numpy(zero_copy_only=False) if hasattr(a, "to_numpy") else np.asarray(a)


def example_statistics(table: pa.Table, cfg: ExampleConfig, vocab: Vocab) -> dict[str, Any]:
    """Counts, mask rates, 80/10/10 split, IsNext rate and length histogram, all measured.

    `selected_rate_uncapped` is selected / maskable tokens over examples whose prediction count
    is below `max_predictions_per_seq` (where the cap binds the rate is lower by design).
    Maskable = real tokens except [CLS] and the two [SEP].
    """
    ids_col = table.column("input_ids").combine_chunks()
    lengths = _np(pc.list_value_length(ids_col)).astype(np.int64)
    labels = _np(table.column("next_sentence_label")).astype(np.int64)
    n = len(lengths)
    edges = list(range(0, cfg.max_seq_length + 8, 8))
    hist, _ = np.histogram(lengths, bins=edges)
    stats: dict[str, Any] = {
        "n_examples": int(n),
        "n_documents": int(len(set(_np(table.column("a_doc_id")).tolist()))),
        "n_tokens": int(lengths.sum()),
        "mean_length": float(lengths.mean()) if n else 0.0,
        "full_length_rate": float((lengths == cfg.max_seq_length).mean()) if n else 0.0,
        "is_next_rate": float((labels == 0).mean()) if n else 0.0,
        "length_histogram": {"bin_edges": edges, "counts": hist.tolist()},
        "masking": "dynamic" if cfg.dynamic_masking else "static",
    }
    if cfg.dynamic_masking or n == 0:
        return stats
    pos_col = table.column("masked_lm_positions").combine_chunks()
    n_masked = _np(pc.list_value_length(pos_col)).astype(np.int64)
    maskable = lengths - 3
    uncapped = n_masked < cfg.max_predictions_per_seq
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    rows = _np(pc.list_parent_indices(pos_col))
    positions = _np(pc.list_flatten(pos_col)).astype(np.int64)
    flat_ids = _np(pc.list_flatten(ids_col))
    shown = flat_ids[offsets[rows] + positions]
    original = _np(pc.list_flatten(table.column("masked_lm_ids").combine_chunks()))
    total = max(1, len(shown))
    is_mask = shown == vocab.mask_id
    is_keep = ~is_mask & (shown == original)
    stats.update(
        {
            "n_masked_tokens": int(n_masked.sum()),
            "n_maskable_tokens": int(maskable.sum()),
            "selected_rate": float(n_masked.sum() / max(1, maskable.sum())),
            "selected_rate_uncapped": float(
                n_masked[uncapped].sum() / max(1, maskable[uncapped].sum())
            ),
            "cap_bound_rate": float((~uncapped).mean()),
            "mask_token_rate": float(is_mask.sum() / total),
            "kept_rate": float(is_keep.sum() / total),
            "random_token_rate": float((~is_mask & ~is_keep).sum() / total),
        }
    )
    return stats


METRIC_KEYS = (
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


def mlflow_metrics(stats: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The scalar statistics in kedro-mlflow's MlflowMetricsHistoryDataset format."""
    return {k: {"value": float(stats[k]), "step": 0} for k in METRIC_KEYS if k in stats}
