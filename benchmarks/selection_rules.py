"""What a fine-tuning grid would deliver under other ways to choose among its trials: collects
`kedro run --env budget --pipeline finetune_glue` runs (every trial keeps its hold-out and dev
scores after each epoch) and scores each rule's choice on dev; it runs nothing itself, and dev
chooses nothing.

The rules, each the pipeline's `best_mean_rate` (a (dropout, learning rate) cell by the mean over
its seeds) applied to a different per-trial score:
- **the pipeline**: each trial's best hold-out epoch (what `finetune_glue` does); dev at those
  epochs;
- **without <rates>** (`--without-rate`): the same on the grid without those learning rates;
- **last epoch**: each trial's hold-out score after its last epoch, the paper's fixed epochs; dev
  at the last epoch;
- **mean curve**: one epoch for all seeds, the epoch whose best cell has the best mean; dev at it.

Several runs of one task are given under different names; "NAME=DIR_A+DIR_B" pools runs made
one fine-tuning dropout rate each (their saved model configs say which) into one grid.

    python benchmarks/selection_rules.py --run "h53=<finetune data_dir>" --run "h52=<A>+<B>" \\
        [--without-rate 1e-3] [--note-file how_the_runs_were_made.md] \\
        [--output benchmarks/selection_rules.md]
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable
from pathlib import Path

from common import (
    ROOT,
    add_note_options,
    command_line,
    dev_at,
    mean_sd,
    note_of,
    read_task_record,
    require_holdout,
    write_report,
)

from bert_pipeline.glue.tasks import get_task
from bert_pipeline.training.selection import TIE, best_mean_rate

GLUE_RECORDS = "08_reporting/glue/*/dev_metrics.json"


def rescored(trials: list[dict], epoch: Callable[[dict], int]) -> list[dict]:
    """The trials as if each had chosen `epoch(trial)` on its hold-out (NaN, say the Pearson of
    constant predictions, ranks lowest, as in the pipeline)."""
    out = []
    for t in trials:
        score = t["history"][epoch(t)]["score"]
        out.append({**t, "best_score": score if math.isfinite(score) else -math.inf,
                    "best_epoch": epoch(t)})  # fmt: skip
    return out


def last_epoch(trials: list[dict]) -> list[dict]:
    return best_mean_rate(rescored(trials, lambda t: len(t["history"]) - 1))


def mean_curve(trials: list[dict]) -> list[dict]:
    """The (cell, epoch) with the best mean hold-out score over the cell's seeds (ties: the
    earlier epoch)."""
    best, best_mean = [], float("-inf")
    for epoch in range(min(len(t["history"]) for t in trials)):
        chosen = best_mean_rate(rescored(trials, lambda t, e=epoch: e))
        mean = statistics.fmean(t["best_score"] for t in chosen)
        if mean > best_mean + TIE:
            best, best_mean = chosen, mean
    return best


def shown(chosen: list[dict], metric: str) -> tuple[str, float]:
    """The chosen trials' dev `metric` (x100) at their `best_epoch`, as text, and its mean."""
    dev, sd = mean_sd(
        [100 * m[metric] for t in chosen for m in dev_at(t["history"], t["best_epoch"])]
    )
    rate = f"{chosen[0]['learning_rate']:g}"
    cell = rate if "dropout" not in chosen[0] else f"{chosen[0]['dropout']:g}, {rate}"
    epochs = "/".join(str(e + 1) for e in sorted({t["best_epoch"] for t in chosen}))
    return f"{dev:.1f} ± {sd:.1f} ({cell}; epoch {epochs})", dev


def read_tasks(name: str, spec: str) -> dict[str, list[dict]]:
    """Each task's trials in a `finetune_glue` run's data_dir, or in runs joined by "+" (one run
    per fine-tuning dropout rate) pooled as bert_tiny_comparison.py pools them."""
    tasks = sorted({p.parent.name for f in spec.split("+") for p in Path(f).glob(GLUE_RECORDS)})
    if not tasks:
        raise SystemExit(f"--run {name}={spec}: no {GLUE_RECORDS}")
    trials = {}
    for task in tasks:
        record = read_task_record(spec, task)
        require_holdout(record, spec)
        if record.get("refits") or any("holdout_seed" in t for t in record["trials"]):
            raise SystemExit(f"{spec}: {task} made with refit or several hold-outs")
        trials[task] = record["trials"]
    return trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, help="NAME=finetune data_dir")
    parser.add_argument(
        "--without-rate",
        type=float,
        action="append",
        default=[],
        help="a rate the smaller grid lacks",
    )
    add_note_options(parser)
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "selection_rules.md")
    args = parser.parse_args()
    rules: dict[str, Callable[[list[dict]], list[dict]]] = {"the pipeline": best_mean_rate}
    dropped = set(args.without_rate)
    if dropped:
        name = "without " + ", ".join(f"{r:g}" for r in sorted(dropped))
        rules[name] = lambda ts: best_mean_rate(
            [t for t in ts if t["learning_rate"] not in dropped]
        )
    rules |= {"last epoch": last_epoch, "mean curve": mean_curve}

    rows: dict[str, list[tuple[str, list[str], list[float]]]] = {}
    for spec in args.run:
        name, _, folders = spec.partition("=")
        if not folders:
            raise SystemExit(f"--run {spec!r}: NAME=<finetune data_dir>")
        for task, trials in read_tasks(name, folders).items():
            if any(row[0] == name for row in rows.get(task, [])):
                raise SystemExit(f"--run {spec!r}: {task} of {name} given twice")
            if all(t["learning_rate"] in dropped for t in trials):
                raise SystemExit(f"--run {spec!r}: {task} has no rate but --without-rate's")
            metric = get_task(task).metrics[0]
            cells = [shown(rule(trials), metric) for rule in rules.values()]
            rows.setdefault(task, []).append((name, [c[0] for c in cells], [c[1] for c in cells]))

    lines = [
        "# Other ways to choose among a fine-tuning grid's trials (benchmarks/selection_rules.py)",
        "",
        f"Last command: `{command_line('benchmarks/selection_rules.py')}`",
        "",
        "Each cell: the dev score (x100, the task's first metric) of the trials the rule chose, "
        "mean ± sd over their seeds, with the (dropout, learning rate) cell (the rate alone in a "
        "run of one dropout) and the epochs (counted from 1) it read them at. Every rule chooses "
        "on the hold-out; dev only measures. "
        "A task of several runs ends with the mean over its runs.",
        "",
        "| task | run | " + " | ".join(rules) + " |",
        "|---|---|" + "---|" * len(rules),
    ]
    for task, task_rows in rows.items():
        metric = get_task(task).metrics[0]
        for name, texts, _ in task_rows:
            lines.append(f"| {task} {metric} | {name} | " + " | ".join(texts) + " |")
        if len(task_rows) > 1:
            means = [sum(r[2][i] for r in task_rows) / len(task_rows) for i in range(len(rules))]
            lines.append(
                f"| {task} {metric} | mean of {len(task_rows)} | "
                + " | ".join(f"{m:.2f}" for m in means)
                + " |"
            )
    write_report(lines, note_of(args), args.output)


if __name__ == "__main__":
    main()
