"""GLUE summary table (dev scores, GLUE average) and leaderboard submission files."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from bert_pipeline.glue.tasks import GLUE_SCORE_TASKS, TASKS, get_task

SUMMARY_COLUMNS = [
    "task",
    "metrics",
    "dev",
    "score",
    "in_glue_average",
    "learning_rate",
    "dropout",  # the chosen rate where `dropout` was a grid axis; empty otherwise
    "seed",
    "best_epoch",
    "train_examples",
]


def glue_average(scores: Mapping[str, float]) -> tuple[float | None, list[str]]:
    """Mean task score over the GLUE-score tasks present (WNLI excluded) and which they were."""
    used = [t for t in GLUE_SCORE_TASKS if t in scores]
    if not used:
        return None, []
    return sum(scores[t] for t in used) / len(used), used


def _split_label(split: str) -> str:
    return {"dev_matched": "m", "dev_mismatched": "mm"}.get(split, "")


def summary_table(results: Iterable[Mapping]) -> pd.DataFrame:
    """One row per task in GLUE order, scores x100 as the leaderboard, then the GLUE average.

    Each result is a task's dev-metrics record (see the finetune_glue nodes): `task`,
    `dev_metrics` {split: {metric: value}}, `score`, `best` and `train_examples`. A task with
    several metrics shows them joined by "/" (e.g. MRPC F1/accuracy, MNLI m/mm accuracy); its
    score averages them, and the GLUE average is the mean of task scores without WNLI.
    """
    by_task = {r["task"]: r for r in results}
    rows, scores = [], {}
    for name in TASKS:
        if name not in by_task:
            continue
        record = by_task[name]
        names, values = [], []
        for split, metrics in record["dev_metrics"].items():
            for metric, value in metrics.items():
                names.append(f"{metric}{'-' + _split_label(split) if _split_label(split) else ''}")
                values.append(f"{100 * value:.1f}")
        scores[name] = 100 * record["score"]
        rows.append(
            {
                "task": name,
                "metrics": "/".join(names),
                "dev": "/".join(values),
                "score": round(scores[name], 2),
                "in_glue_average": name in GLUE_SCORE_TASKS,
                "learning_rate": record["best"]["learning_rate"],
                "dropout": record["best"].get("dropout"),
                "seed": record["best"]["seed"],
                "best_epoch": record["best"]["best_epoch"] + 1,
                "train_examples": record["train_examples"],
            }
        )
    average, used = glue_average(scores)
    if average is not None:
        rows.append(
            {
                "task": "GLUE average",
                "metrics": f"mean of {len(used)} task scores ({', '.join(used)})",
                "dev": f"{average:.1f}",
                "score": round(average, 2),
                "in_glue_average": True,
            }
        )
    table = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    return table.astype({"seed": "Int64", "best_epoch": "Int64", "train_examples": "Int64"})


def summary_markdown(table: pd.DataFrame) -> str:
    """The summary table as GitHub markdown (no extra dependency)."""
    shown = ["task", "metrics", "dev", "score", "learning_rate", "dropout", "seed", "best_epoch"]
    if table["dropout"].isna().all():
        shown.remove("dropout")
    lines = [
        "# GLUE dev results",
        "",
        "Scores x100. The GLUE average is the mean of the task scores (tasks with several metrics "
        "averaged first), over the tasks run; WNLI is reported but not averaged.",
        "",
        "| " + " | ".join(shown) + " |",
        "|" + "|".join("---" for _ in shown) + "|",
    ]
    for row in table.to_dict("records"):
        cells = ["" if pd.isna(row[c]) else str(row[c]) for c in shown]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary_metrics(table: pd.DataFrame) -> dict[str, dict[str, float | int]]:
    """Task scores and the GLUE average in kedro-mlflow's metrics-history form."""
    out = {}
    for row in table.to_dict("records"):
        key = "average" if row["task"] == "GLUE average" else f"{row['task']}_score"
        out[key] = {"value": float(row["score"]), "step": 0}
    return out


def submission_files(predictions: Iterable[pd.DataFrame]) -> dict[str, str]:
    """Leaderboard files {"<TASK>.tsv": "index\\tprediction\\n..."} from test predictions.

    Label strings are those of the glue_data files (entailment/not_entailment, 0/1, ...);
    STS-B scores keep three decimals; MNLI writes MNLI-m.tsv and MNLI-mm.tsv.
    """
    files = {}
    for frame in predictions:
        if frame.empty:
            continue
        task = get_task(str(frame["task"].iloc[0]))
        for split in task.test_splits:
            rows = frame[frame["split"] == split].sort_values("idx")
            if task.is_regression:
                labels = [f"{v:.3f}" for v in rows["prediction"]]
            else:
                labels = [task.labels[int(v)] for v in rows["prediction"]]
            body = "".join(f"{i}\t{p}\n" for i, p in zip(rows["idx"], labels, strict=True))
            files[f"{task.submission_files[split]}.tsv"] = "index\tprediction\n" + body
    return files
