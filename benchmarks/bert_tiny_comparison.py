"""The budget model against Google's BERT-Tiny (2 layers, 128 wide): collects what
`kedro run --env budget --pipeline finetune_glue` wrote, it runs nothing itself.

Each row is a `finetune_glue` output folder (its `data_dir`) made with
`finetune_glue.defaults.selection_holdout` > 0: every (lr, seed) trial chose its epoch on the
held-out slice of train. Per task the learning rate with the best mean hold-out score over the
seeds is chosen; the cells are the dev metrics of that rate's trials (each at the epoch its
hold-out chose), mean and standard deviation over the seeds. Dev never chooses anything.
A folder made with `finetune_glue.defaults.refit=true` holds that rate's seeds trained again on
all of train, each stopped at its chosen epoch: its cells are those refits' dev metrics
("refit on all N train"); otherwise the hold-out's rows were not trained on. Where the trials
hold several fine-tuning dropout rates (`finetune_glue.defaults.dropout` as a list), the rate is
chosen with the dropout, by the same mean; `--row "NAME=DIR_A+DIR_B"` pools runs made one rate
each (their saved model configs say which) into that choice.

Rows are kept in `--results` (a JSON line per row and task), so rows made on other machines or
in earlier sessions stay in the table; `--row` with a name already there replaces that row's
cells of the tasks its folder holds and keeps the others (a task fine-tuned later joins its row).
Several folders of one row in one call that hold the same task are pretraining draws (one
pretrained model each, say two pretraining seeds): the cell is the mean and standard deviation
over the draws of each draw's mean, as one pretraining run is one draw of the recipe.
`--draw NAME=EARLIER ROW` adds the kept cells of an earlier row as one more draw (or as the
draws that row already holds) to the tasks NAME's folders hold in this call (for draws whose
folders are gone).

    python benchmarks/bert_tiny_comparison.py \\
        --row "budget, 60 min=data/budget_ft" --row "random init=data/random_ft" \\
        [--draw "budget, 60 min=an earlier row"] [--note-file how_the_rows_were_made.md] \\
        [--results benchmarks/bert_tiny_comparison.jsonl]
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from common import (
    ROOT,
    add_note_options,
    command_line,
    dev_at,
    mean_sd,
    note_of,
    read_jsonl,
    read_task_record,
    require_holdout,
    write_report,
)

from bert_pipeline.glue.tasks import get_task
from bert_pipeline.training.selection import best_mean_rate

STEM = Path(__file__).stem
TASKS = ["cola", "sst2", "mrpc", "stsb", "rte"]
# google-research/bert README, "Here are the corresponding GLUE scores on the test set": the best
# of batch {8, 16, 32, 64, 128} x lr {3e-4, 1e-4, 5e-5, 3e-5}, 4 epochs, per task
BERT_TINY_TEST = {
    "cola": {"matthews_corr": 0.0},
    "sst2": {"accuracy": 83.2},
    "mrpc": {"f1": 81.1, "accuracy": 71.1},
    "stsb": {"pearson": 74.3, "spearman": 73.6},
    "rte": {"accuracy": 57.2},
}
# dev, transformers' run_glue (5 epochs, lr 1e-4, batch 32), mean of 5 seeds where given: the
# M-FAC model cards of prajjwal1/bert-tiny as issue #36 quotes them (SST-2: one run)
BERT_TINY_DEV = {
    "sst2": {"accuracy": 83.72},
    "mrpc": {"f1": 81.68},
    "stsb": {"pearson": 64.39},
}


def task_cell(record: dict) -> dict:
    """The chosen rate and, per dev metric, (mean, std) over its seeds, from a dev_metrics.json.

    Where the trials hold several dropout rates (a `dropout` grid, or folders pooled by
    `read_row`), the rate is chosen with the dropout, by the best mean over the seeds
    (`best_mean_rate`, the rule `refit` uses), whichever trial the run itself delivered."""
    require_holdout(record, f"task {record['task']}")
    chosen = best_mean_rate(record["trials"])
    tag, rate, dropout = (chosen[0].get(k) for k in ("tag", "learning_rate", "dropout"))
    measured = [(t["history"], t["best_epoch"]) for t in chosen]
    refits = record.get("refits", [])
    if refits:  # the same rate's seeds trained again on all of train, at their chosen epochs
        refitted = {(r.get("tag"), r["learning_rate"]) for r in refits}
        assert refitted == {(tag, rate)}, "refit of another rate"
        measured = [(r["history"], r["epoch"]) for r in refits]
    dev = [metrics for history, epoch in measured for metrics in dev_at(history, epoch)]
    values = {name: [100 * m[name] for m in dev] for name in get_task(record["task"]).metrics}
    return {
        "rate": rate,
        **({"dropout": dropout} if dropout is not None else {}),
        "seeds": len(measured),
        "train": record["train_examples"],
        **({"refit": True} if refits else {}),
        "metrics": {k: list(mean_sd(v)) for k, v in values.items()},
    }


def combine_draws(cells: list[dict]) -> dict:
    """One cell from several pretraining draws' cells of a task: mean and std over the draws.

    A cell that is already several draws (an earlier row of them, whose folders are gone) counts
    as its draws: its mean and sample std give back their sum and their squared deviations
    exactly, so the pooled std equals the one over all the draws' means."""
    if len(cells) == 1:
        return cells[0]
    if len({bool(c.get("refit")) for c in cells}) > 1:
        raise SystemExit("draws of one row must all be refit, or none")
    names = cells[0]["metrics"]
    if len({"dropout" in c for c in cells}) > 1:
        raise SystemExit("draws of one row must all choose a dropout rate, or none")

    def listed(cell: dict, key: str) -> list:
        return cell[key] if "draws" in cell else [cell[key]]

    counts = [c.get("draws", 1) for c in cells]
    total = sum(counts)
    metrics = {}
    for k in names:
        moments = [(n, *c["metrics"][k]) for n, c in zip(counts, cells, strict=True)]
        mean = sum(n * m for n, m, _ in moments) / total
        # within each cell's draws, then between the cells' means: no cancellation
        deviations = sum((n - 1) * s * s + n * (m - mean) ** 2 for n, m, s in moments)
        metrics[k] = [mean, (deviations / (total - 1)) ** 0.5]
    return {
        "rate": [r for c in cells for r in listed(c, "rate")],
        **(
            {"dropout": [r for c in cells for r in listed(c, "dropout")]}
            if "dropout" in cells[0]
            else {}
        ),
        "seeds": min(c["seeds"] for c in cells),
        "draws": total,
        "train": cells[0]["train"],
        **({"refit": True} if cells[0].get("refit") else {}),
        "metrics": metrics,
    }


def read_row(spec: str) -> dict[str, dict]:
    """A row's cells from a folder, or from folders joined by "+" (one run per dropout rate)."""
    cells = {}
    for task in TASKS:
        record = read_task_record(spec, task)
        if record is not None:
            cells[task] = task_cell(record)
    if not cells:
        raise SystemExit(f"{spec}: no 08_reporting/glue/<task>/dev_metrics.json")
    return cells


def _reference(values: dict[str, float]) -> str:
    return " / ".join(f"{k} {v:.1f}" for k, v in values.items())


def earlier_draw(records: list[dict], row: str, task: str) -> dict:
    """The kept cell of `row` and `task`: one pretraining draw, or the several it already holds."""
    for record in records:
        if record["row"] == row and record["task"] == task:
            return {k: v for k, v in record.items() if k not in ("row", "task", "collected")}
    raise SystemExit(f"--draw: no row {row!r} with task {task} in the results")


def update_results(path: Path, records: list[dict], new_rows: dict[str, dict]) -> dict[str, dict]:
    """`records` with the cells of `new_rows` in place of those of the same row and task
    (written back to `path`)."""
    records = [r for r in records if r["task"] not in new_rows.get(r["row"], {})]
    today = str(datetime.date.today())
    for name, cells in new_rows.items():
        records += [{"row": name, "task": t, "collected": today, **c} for t, c in cells.items()]
    if new_rows:  # only rendering: the file stays as it is
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    rows: dict[str, dict] = {}
    for record in records:
        rows.setdefault(record["row"], {})[record["task"]] = record
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--row", action="append", default=[], help="NAME=finetune data_dir")
    parser.add_argument(
        "--draw", action="append", default=[], help="NAME=EARLIER ROW: its draws join NAME's"
    )
    add_note_options(parser)
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / f"{STEM}.jsonl")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / f"{STEM}.md")
    args = parser.parse_args()
    draws: dict[str, dict[str, list[dict]]] = {}
    for spec in args.row:
        name, _, folder = spec.partition("=")
        for task, cell in read_row(folder).items():
            draws.setdefault(name, {}).setdefault(task, []).append(cell)
    earlier: dict[str, list[str]] = {}
    for spec in args.draw:
        name, _, row = spec.partition("=")
        if name not in draws:
            raise SystemExit(f"--draw {spec!r}: no --row {name!r} in this call")
        earlier.setdefault(name, []).append(row)
    records = read_jsonl(args.results) if args.results.is_file() else []
    new_rows = {  # earlier draws first, as they were made
        name: {
            task: combine_draws(
                [earlier_draw(records, row, task) for row in earlier.get(name, [])] + cells
            )
            for task, cells in tasks.items()
        }
        for name, tasks in draws.items()
    }
    rows = update_results(args.results, records, new_rows)
    if not rows:
        raise SystemExit(f"{args.results}: no rows; add one with --row NAME=DIR")
    tasks = [t for t in TASKS if any(t in cells for cells in rows.values())]
    lines = [
        "# The budget model against BERT-Tiny (benchmarks/bert_tiny_comparison.py)",
        "",
        f"Last command: `{command_line('benchmarks/bert_tiny_comparison.py')}`; the rows are "
        f"those of `{args.results.name}`, each collected on the date it holds from the runs "
        "described under the table.",
        "",
        "GLUE dev, x100. Ours: the learning rate (and the fine-tuning dropout, where a cell "
        "names one) chosen on a held-out slice of train "
        "(`selection_holdout`), mean ± std over the seeds at that rate; dev chose nothing. "
        "A row of several pretraining draws: the mean ± std over the draws of each draw's "
        "mean at the rate its hold-out chose. The hold-out's rows are not trained on, except in "
        "a cell that says 'refit on all': there that rate's seeds trained again on all of "
        "train (`refit`), each stopped at the epoch its hold-out chose. A classification "
        "task's hold-out is drawn per label, keeping train's label shares, in rows that say "
        "'hold-out drawn per label' (the second command's draw since aafb0ca); the other rows "
        "drew it without regard to labels.",
        "",
        "| model | " + " | ".join(tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    for name, cells in rows.items():
        out = []
        for task in tasks:
            cell = cells.get(task)
            if cell is None:
                out.append("-")
                continue
            shown = " / ".join(f"{k} {m:.1f} ± {s:.1f}" for k, (m, s) in cell["metrics"].items())
            if "draws" in cell:
                rates = " / ".join(f"{r:g}" for r in cell["rate"])
                if "dropout" in cell:
                    rates += ", dropout " + " / ".join(f"{r:g}" for r in cell["dropout"])
                how = f"lr {rates}, {cell['draws']} pretraining draws x {cell['seeds']} seeds"
            else:
                dropout = f", dropout {cell['dropout']:g}" if "dropout" in cell else ""
                how = f"lr {cell['rate']:g}{dropout}, {cell['seeds']} seeds"
            trained = "refit on all " if cell.get("refit") else ""
            out.append(f"{shown} ({how}, {trained}{cell['train']:,} train)")
        lines.append(f"| {name} | " + " | ".join(out) + " |")
    for label, reference in (
        ("BERT-Tiny, dev (run_glue, published)", BERT_TINY_DEV),
        ("BERT-Tiny, test (Google, published)", BERT_TINY_TEST),
    ):
        out = [_reference(reference[t]) if t in reference else "-" for t in tasks]
        lines.append(f"| {label} | " + " | ".join(out) + " |")
    write_report(lines, note_of(args), args.output)


if __name__ == "__main__":
    main()
