"""How much a task's fine-tuning choice depends on which rows of train were held out: collects
`kedro run --env budget --pipeline finetune_glue` runs of one pretrained model that differ only in
`finetune_glue.defaults.holdout_seed`, or one run made with `holdouts` > 1 (which trains the grid
once per hold-out and refits the pooled choice); it runs nothing itself.

Each run's choice of a (dropout, learning rate) cell is recomputed with the rule `refit` uses
(`best_mean_rate`: the best mean over the seeds of each trial's best hold-out score; a run without
refit delivers its best single trial, which may sit in another cell). The report shows every cell's
mean hold-out and dev score in every run, which cell each run's hold-out chose, and the cell chosen
by the mean over all runs' trials, the hold-outs pooled (drawn independently, they may share rows).
Dev is read at the epoch each trial's own hold-out chose; dev chooses nothing. A pooled run's
folder (`--pooled`) gives one column per hold-out seed, and its refit's dev, the answer that run
delivers, below the table.

    python benchmarks/holdout_noise.py --task rte \\
        --run 0=data/hour_glue --run 1=data/hour_glue_h1 --run 2=data/hour_glue_h2 \\
        [--note-file how_the_runs_were_made.md] [--output benchmarks/holdout_noise_rte.md]
    python benchmarks/holdout_noise.py --task rte --pooled data/hour_glue_pooled
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from common import (
    ROOT,
    add_note_options,
    command_line,
    dev_at,
    glue_record_path,
    mean_sd,
    note_of,
    require_holdout,
    write_report,
)

from bert_pipeline.glue.tasks import get_task
from bert_pipeline.training.selection import best_mean_rate


def cell_of(trial: dict) -> tuple[float | None, float]:
    return trial.get("dropout"), trial["learning_rate"]


def dev_scores(records: list[dict], metric: str, epoch: str = "best_epoch") -> list[float]:
    """Each record's dev `metric` (x100) at its `epoch` key: the one a trial's hold-out chose, or
    the one a refit kept ("epoch")."""
    return [100 * m[metric] for r in records for m in dev_at(r["history"], r[epoch])]


def read_record(folder: Path, task: str) -> tuple[Path, dict]:
    path = glue_record_path(folder, task)
    if not path.is_file():
        raise SystemExit(f"{path}: no such file (a finetune_glue data_dir with {task} in it?)")
    record = json.loads(path.read_text(encoding="utf-8"))
    require_holdout(record, str(path))
    return path, record


def read_run(folder: Path, task: str) -> list[dict]:
    path, record = read_record(folder, task)
    if record.get("refits"):
        raise SystemExit(
            f"{path}: made with refit; give a run of several hold-outs with --pooled, and "
            "runs of one hold-out each, without refit, with --run"
        )
    return record["trials"]


def read_pooled(folder: Path, task: str) -> tuple[dict[str, list[dict]], list[dict]]:
    """A run of several hold-outs: its trials by hold-out seed, and its refits."""
    path, record = read_record(folder, task)
    runs: dict[str, list[dict]] = {}
    for trial in record["trials"]:
        if "holdout_seed" not in trial:
            raise SystemExit(f"{path}: a run of one hold-out; give it with --run SEED=DIR")
        runs.setdefault(str(trial["holdout_seed"]), []).append(trial)
    if not record.get("refits"):
        raise SystemExit(f"{path}: no refit (a run with `holdouts` > 1 always refits)")
    return runs, record["refits"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True)
    sources = parser.add_mutually_exclusive_group(required=True)
    sources.add_argument("--run", action="append", help="HOLDOUT_SEED=finetune data_dir")
    sources.add_argument("--pooled", type=Path, help="data_dir of a run with `holdouts` > 1")
    add_note_options(parser)
    parser.add_argument("--output", type=Path, help="default: benchmarks/holdout_noise_<task>.md")
    args = parser.parse_args()
    output = args.output or ROOT / "benchmarks" / f"holdout_noise_{args.task}.md"
    metric = get_task(args.task).metrics[0]
    runs, refits = {}, []
    if args.pooled:
        runs, refits = read_pooled(args.pooled, args.task)
    for spec in args.run or []:
        seed, _, folder = spec.partition("=")
        if seed in runs or seed == "all":
            raise SystemExit(f"--run {spec!r}: each hold-out seed once, and none named 'all'")
        runs[seed] = read_run(Path(folder), args.task)
    if len(runs) < 2:
        raise SystemExit("--run: give at least two hold-out seeds")
    cells = sorted(
        {cell_of(t) for trials in runs.values() for t in trials},
        key=lambda c: (c[0] is not None, c[0] or 0.0, c[1]),
    )
    chosen = {seed: cell_of(best_mean_rate(trials)[0]) for seed, trials in runs.items()}
    every = [t for trials in runs.values() for t in trials]
    chosen["all"] = cell_of(best_mean_rate(every)[0])

    def shown(trials: list[dict], pick: tuple) -> str:
        mine = [t for t in trials if cell_of(t) == pick]
        if not mine:
            return "-"
        held = 100 * statistics.fmean(t["best_score"] for t in mine)
        dev, sd = mean_sd(dev_scores(mine, metric))
        return f"{held:.1f} / {dev:.1f} ± {sd:.1f}"

    columns = [*runs, "all"]
    lines = [
        f"# How much {args.task.upper()}'s choice depends on the hold-out "
        "(benchmarks/holdout_noise.py)",
        "",
        f"Last command: `{command_line('benchmarks/holdout_noise.py')}`",
        "",
        f"Each cell: the mean best hold-out score over the trials of that (dropout, learning rate)"
        f" / their dev {metric} (x100) at the epochs their hold-outs chose, mean ± sd. A column is "
        "one run's hold-out (`holdout_seed`); 'all' pools every run's trials. Bold: the cell that "
        "column chose.",
        "",
        "| dropout, lr | " + " | ".join(f"hold-out seed {c}" for c in runs) + " | all |",
        "|---|" + "---|" * len(columns),
    ]
    for cell in cells:
        out = []
        for column in columns:
            text = shown(every if column == "all" else runs[column], cell)
            out.append(f"**{text}**" if chosen[column] == cell else text)
        dropout, rate = cell
        name = f"{'checkpoint' if dropout is None else f'{dropout:g}'}, {rate:g}"
        lines.append(f"| {name} | " + " | ".join(out) + " |")
    if refits:
        dev, sd = mean_sd(dev_scores(refits, metric, epoch="epoch"))
        epochs = ", ".join(str(r["epoch"]) for r in refits)
        lines += [
            "",
            f"The run's answer: the pooled cell's seeds trained again on all of train, stopped at "
            f"the median of their chosen epochs ({epochs}): dev {metric} {dev:.1f} ± {sd:.1f}.",
        ]
    write_report(lines, note_of(args), output)


if __name__ == "__main__":
    main()
