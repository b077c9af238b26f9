"""Entity-level precision, recall and F1 (seqeval), the CoNLL-2003 measures."""

from __future__ import annotations

from collections.abc import Sequence

from seqeval.metrics import f1_score, precision_score, recall_score
from seqeval.scheme import IOB2


def entity_metrics(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict:
    """conlleval's precision/recall/F1 (an I-X after O opens an entity, as CoNLL's script) and
    `f1_strict`, which counts only well-formed IOB2 entities (seqeval's strict mode)."""
    gold, pred = [list(s) for s in gold], [list(s) for s in pred]
    return {
        "precision": float(precision_score(gold, pred, zero_division=0)),
        "recall": float(recall_score(gold, pred, zero_division=0)),
        "f1": float(f1_score(gold, pred, zero_division=0)),
        "f1_strict": float(f1_score(gold, pred, mode="strict", scheme=IOB2, zero_division=0)),
    }
