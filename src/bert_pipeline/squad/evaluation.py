"""Answer spans from start/end logits, and the official SQuAD measures.

`best_answers` is the n-best search of google's run_squad.py and transformers' run_qa.py: the
`n_best_size` highest start and end logits of every window, spans inside the context, end not
before start and at most `max_answer_length` tokens, scored by start + end logit. For v2.0 the
no-answer score is the lowest [CLS] start + end over a question's windows, and the answer is ""
when it beats the best span by more than the threshold (chosen on dev as the official script's
`best_f1_thresh`). `squad_metrics` follows the official evaluate-v1.1/v2.0 scripts: answers
normalized (lower case, no punctuation, no articles a/an/the, single spaces), exact match and
token F1 against the best of the gold answers, x100.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Sequence

import numpy as np
import pandas as pd

from bert_pipeline.squad.features import Window


def best_answers(
    frame: pd.DataFrame,
    windows: Sequence[Window],
    start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray],
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> tuple[dict[str, str], dict[str, float]]:
    """({id: best non-null answer}, {id: null score - best span score}) of every question."""
    by_example: dict[int, list[int]] = collections.defaultdict(list)
    for i, w in enumerate(windows):
        by_example[w.example].append(i)
    answers, null_diff = {}, {}
    for row, (qid, context) in enumerate(zip(frame["id"], frame["context"], strict=True)):
        best_text, best_score, null_score = "", -np.inf, np.inf
        for i in by_example.get(row, []):
            starts, ends, offsets = start_logits[i], end_logits[i], windows[i].offsets
            null_score = min(null_score, float(starts[0] + ends[0]))
            top_starts = np.argsort(starts)[::-1][:n_best_size]
            top_ends = np.argsort(ends)[::-1][:n_best_size]
            for s in top_starts:
                if s >= len(offsets) or offsets[s] is None:
                    continue
                for e in top_ends:
                    if e >= len(offsets) or offsets[e] is None:
                        continue
                    if e < s or e - s + 1 > max_answer_length:
                        continue
                    score = float(starts[s] + ends[e])
                    if score > best_score:
                        best_score = score
                        best_text = context[offsets[s][0] : offsets[e][1]]
        answers[qid] = best_text
        null_diff[qid] = null_score - best_score if np.isfinite(best_score) else np.inf
    return answers, null_diff


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _f1(prediction: str, gold: str) -> float:
    pred, truth = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not truth:  # v2.0: an empty answer matches only an empty answer
        return float(pred == truth)
    common = collections.Counter(pred) & collections.Counter(truth)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def _scores(frame: pd.DataFrame, predictions: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    exact, f1 = [], []
    for qid, golds in zip(frame["id"], frame["answer_texts"], strict=True):
        golds = [g for g in golds if normalize_answer(g)] or [""]
        pred = predictions.get(qid, "")
        exact.append(max(float(normalize_answer(pred) == normalize_answer(g)) for g in golds))
        f1.append(max(_f1(pred, g) for g in golds))
    return np.array(exact), np.array(f1)


def _best_threshold(
    scores: np.ndarray, null_diff: np.ndarray, has_answer: np.ndarray, answered: np.ndarray
) -> tuple[float, float]:
    """The official find_best_thresh: predict "" when null_diff > t; the best t and its score."""
    current = best = float((~has_answer).sum())  # everything predicted empty
    threshold = 0.0
    for i in np.argsort(null_diff, kind="stable"):
        if not answered[i]:
            continue
        current += scores[i] if has_answer[i] else -1.0
        if current > best:
            best, threshold = current, float(null_diff[i])
    return 100.0 * best / len(scores), threshold


def squad_metrics(
    frame: pd.DataFrame,
    answers: dict[str, str],
    null_diff: dict[str, float] | None = None,
    threshold: float | None = None,
) -> tuple[dict[str, float], dict[str, str]]:
    """Metrics x100 and the final predictions. Without `null_diff` (v1.1) every question is
    answered. With it (v2.0) a question gets "" when its null_diff > threshold; threshold None
    chooses the one that maximizes F1 on this data (as the official best_f1_thresh)."""
    if null_diff is None:
        exact, f1 = _scores(frame, answers)
        metrics = {"exact_match": 100 * float(exact.mean()), "f1": 100 * float(f1.mean())}
        return metrics, dict(answers)
    ids = frame["id"].tolist()
    has_answer = frame["answer_texts"].map(len).to_numpy() > 0
    diffs = np.array([null_diff[i] for i in ids])
    answered = np.array([answers[i] != "" for i in ids])
    exact_all, f1_all = _scores(frame, answers)
    best_exact, exact_thresh = _best_threshold(exact_all, diffs, has_answer, answered)
    best_f1, f1_thresh = _best_threshold(f1_all, diffs, has_answer, answered)
    if threshold is None:
        threshold = f1_thresh
    final = {i: ("" if d > threshold else answers[i]) for i, d in zip(ids, diffs, strict=True)}
    exact, f1 = _scores(frame, final)
    metrics = {
        "exact_match": 100 * exact.mean(),
        "f1": 100 * f1.mean(),
        "null_threshold": threshold,
        "best_exact_match": best_exact,
        "best_exact_match_threshold": exact_thresh,
        "best_f1": best_f1,
        "best_f1_threshold": f1_thresh,
    }
    for name, keep in (("HasAns", has_answer), ("NoAns", ~has_answer)):
        if keep.any():
            metrics[f"{name}_exact_match"] = 100 * exact[keep].mean()
            metrics[f"{name}_f1"] = 100 * f1[keep].mean()
    return {k: float(v) for k, v in metrics.items()}, final
