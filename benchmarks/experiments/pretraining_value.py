"""Does pretraining pay off? GLUE dev scores of budget-pretrained BERTs against a random init.

Frozen experiment: kept as the record of how pretraining_value.md was measured, not maintained
against the current code (its imports resolve; its numbers are not re-checked) and
imported by no tool.

`finetune` runs one model through `finetune_task` (the library function of the finetune_glue
pipeline: the lr x seed grid, best epoch on dev) on each task and writes its trials to a JSON
file; `--random-like DIR` instead fine-tunes a random init of DIR's architecture and vocabulary.
Every model sees the same (seeded) train subsample; results are compared only within one
fine-tuning protocol (epochs, batch, grid, pooling). `probe` measures the frozen encoder instead
(zero-shot STS-B cosine, SST-2 linear probe): what pretraining put in the features, before
fine-tuning can relearn or erase it. `pretraining` saves an MLflow pretraining run's curves and
times. `report` merges such files into benchmarks/experiments/pretraining_value.md, .png and
.jsonl; the .jsonl holds every record it used, so a later report can start from it and add new
files.

    python benchmarks/experiments/pretraining_value.py finetune --name budget \\
        --model data/budget/06_models/bert_pretrained --results /tmp/value_budget.json
    python benchmarks/experiments/pretraining_value.py finetune --name random \\
        --random-like data/budget/06_models/bert_pretrained --results /tmp/value_random.json
    python benchmarks/experiments/pretraining_value.py probe --name budget \\
        --model data/budget/06_models/bert_pretrained --results /tmp/probe_budget.json
    python benchmarks/experiments/pretraining_value.py pretraining --name budget \\
        --run-id <mlflow run id> --results /tmp/run_budget.json
    python benchmarks/experiments/pretraining_value.py report --baseline random \\
        --inputs benchmarks/experiments/pretraining_value.jsonl /tmp/value_*.json /tmp/run_*.json

For each model and task the learning rate with the best mean dev score over the seeds is chosen,
and the table shows the mean and the standard deviation over the seeds at that rate.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/common.py
from common import cpu_name  # noqa: E402
from glue_quality import DEFAULT_GLUE, finetune_config, sample  # noqa: E402

from bert_pipeline.model.config import CLASSIFIER_POOLINGS  # noqa: E402

OUT = Path(__file__).with_suffix(".md")
TASKS = ["cola", "sst2", "mrpc", "stsb", "rte"]
CURVES = ("val/mlm_accuracy", "val/mlm_loss", "val/nsp_accuracy")


def checkpoint_for(args: argparse.Namespace) -> tuple[str, dict]:
    from bert_pipeline.model.checkpoint import random_like, read_checkpoint

    if args.model:
        return str(args.model), read_checkpoint(args.model)
    checkpoint = random_like(read_checkpoint(args.random_like), args.init_seed)
    return f"random init (seed {args.init_seed}) of {args.random_like}'s config", checkpoint


def finetune(args: argparse.Namespace) -> None:
    from bert_pipeline.glue.finetune import finetune_task
    from bert_pipeline.glue.loading import load_glue_tsv_task
    from bert_pipeline.glue.tasks import get_task

    torch.set_num_threads(args.threads)
    source, checkpoint = checkpoint_for(args)
    config = finetune_config(args, args.lrs, classifier_pooling=args.pooling, progress_bar=False)
    tasks = {}
    if args.resume and args.results.is_file():  # tasks of an interrupted run are kept
        kept = json.loads(args.results.read_text())
        if kept["config"].get("pooling", "cls") != args.pooling:
            sys.exit(f"{args.results}: its tasks were fine-tuned with another --pooling")
        tasks = kept["tasks"]
    for name in args.tasks:
        task = get_task(name)
        if task.name in tasks:
            continue
        splits = load_glue_tsv_task(args.glue_dir, task)
        train = sample(splits["train"], args.max_train_examples, 0)
        dev = pd.concat([splits[s] for s in task.dev_splits], ignore_index=True)
        test = splits[task.test_splits[0]].head(0)  # dev scores only
        start, cpu_start = time.perf_counter(), time.process_time()
        result = finetune_task(task, train, dev, test, checkpoint, config, source=source)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        trials = [
            {
                "lr": t["learning_rate"],
                "seed": t["seed"],
                "score": t["best_score"],
                "epoch": t["best_epoch"] + 1,
                "metrics": t["history"][t["best_epoch"]]["metrics"],
                "curve": [h["score"] for h in t["history"]],
            }
            for t in result.trials
        ]
        tasks[task.name] = {
            "train": len(train),
            "dev": len(dev),
            "s": seconds,
            "cpu_s": cpu_seconds,
            "trials": trials,
        }
        print(f"{args.name} {task.name}: {seconds:.0f} s, best {result.best}", flush=True)
        write_results(args, source, tasks)


def mean_pooled(checkpoint: dict, texts: list[str], source: str) -> tuple[np.ndarray, np.ndarray]:
    """[layers, texts, hidden] twice: every hidden state averaged over each text's tokens, and
    its first token's ([CLS], the vector fine-tuning's pooler reads with `pooling: cls`)."""
    from bert_pipeline.extract_features import extract_features

    count = checkpoint["config"]["num_hidden_layers"] + 1
    frame = pd.DataFrame({"text_a": texts, "text_b": [None] * len(texts)})
    table = extract_features(checkpoint, frame, list(range(count)), source=source)
    lines = table.column("line").to_numpy()
    starts = np.flatnonzero(np.r_[True, lines[1:] != lines[:-1]])
    counts = np.diff(np.r_[starts, len(lines)])[:, None]
    pooled, first = [], []
    for layer in range(count):
        vectors = table.column(f"layer_{layer}").combine_chunks().flatten().to_numpy()
        vectors = vectors.reshape(len(lines), -1)
        pooled.append(np.add.reduceat(vectors, starts) / counts)
        first.append(vectors[starts])
    return np.stack(pooled), np.stack(first)


def probe(args: argparse.Namespace) -> None:
    """What the frozen encoder knows, without fine-tuning: per layer, STS-B dev Pearson of the
    cosine of mean-pooled sentence vectors (zero-shot) and of the [CLS] vectors, and SST-2 dev
    accuracy of a logistic regression on the mean-pooled ones (trained on the fine-tuning's
    train subsample)."""
    from scipy.stats import pearsonr
    from sklearn.linear_model import LogisticRegression

    from bert_pipeline.glue.loading import load_glue_tsv_task
    from bert_pipeline.glue.tasks import get_task

    torch.set_num_threads(args.threads)
    source, checkpoint = checkpoint_for(args)
    stsb = load_glue_tsv_task(args.glue_dir, get_task("stsb"))["dev"]
    sst2 = load_glue_tsv_task(args.glue_dir, get_task("sst2"))
    train = sample(sst2["train"], args.max_train_examples, 0)
    (a, a_cls), (b, b_cls) = (
        mean_pooled(checkpoint, list(stsb[c]), source) for c in ("text_a", "text_b")
    )
    x_train = mean_pooled(checkpoint, list(train["text_a"]), source)[0]
    x_dev = mean_pooled(checkpoint, list(sst2["dev"]["text_a"]), source)[0]

    def cosine_pearson(u: np.ndarray, v: np.ndarray) -> float | None:
        """None where every text has the same vector (layer 0's [CLS])."""
        cosine = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
        r = float(pearsonr(cosine, stsb["label"])[0])
        return None if np.isnan(r) else r

    layers = []
    for layer in range(len(a)):
        classifier = LogisticRegression(max_iter=2000).fit(x_train[layer], train["label"])
        layers.append(
            {
                "layer": layer,
                "stsb_cosine_pearson": cosine_pearson(a[layer], b[layer]),
                "stsb_cls_cosine_pearson": cosine_pearson(a_cls[layer], b_cls[layer]),
                "sst2_linear_accuracy": float(classifier.score(x_dev[layer], sst2["dev"]["label"])),
            }
        )
        print(args.name, layers[-1], flush=True)
    command = shlex.join(["python", "benchmarks/experiments/pretraining_value.py", *sys.argv[1:]])
    result = {"name": args.name, "source": source, "command": command, "layers": layers}
    args.results.write_text(json.dumps(result, indent=1), encoding="utf-8")


def probe_table(probes: list[dict]) -> list[str]:
    lines = [
        "## Frozen features",
        "",
        "The encoder without fine-tuning, per hidden state (0 = embeddings), each text mean-pooled "
        "over its tokens: STS-B dev Pearson of the cosine between the two sentences' vectors "
        "(zero-shot), and SST-2 dev accuracy of a logistic regression trained on the vectors of "
        "the fine-tuning's SST-2 train subsample (x100); where measured, also the STS-B cosine of "
        "the [CLS] vectors alone, the position fine-tuning reads through the pooler.",
        "",
        "| model | " + " | ".join(f"layer {x['layer']}" for x in probes[0]["layers"]) + " |",
        "|---|" + "---:|" * len(probes[0]["layers"]),
    ]
    for p in probes:
        cells = [
            f"STS-B {100 * x['stsb_cosine_pearson']:.1f} / "
            f"SST-2 {100 * x['sst2_linear_accuracy']:.1f}"
            + (
                f" / [CLS] STS-B {100 * c:.1f}"
                if (c := x.get("stsb_cls_cosine_pearson")) is not None
                else ""
            )
            for x in p["layers"]
        ]
        lines.append(f"| {p['name']} | " + " | ".join(cells) + " |")
    lines += ["", *[f"- {p['name']}: `{p['command']}`" for p in probes], ""]
    return lines


def write_results(args: argparse.Namespace, source: str, tasks: dict) -> None:
    """The trials so far (after every task, so an interrupted run keeps what it finished)."""
    res = {
        "name": args.name,
        "source": source,
        "command": shlex.join(
            ["python", "benchmarks/experiments/pretraining_value.py", *sys.argv[1:]]
        ),
        "finished": f"{datetime.now(UTC):%Y-%m-%d %H:%M}",
        "cpu": cpu_name(),
        "threads": args.threads,
        "load_after": os.getloadavg()[0],
        "config": {k: getattr(args, k) for k in ("lrs", "seeds", "epochs", "batch_size", "pooling")}
        | {"max_seq_length": args.max_seq_length, "max_train": args.max_train_examples},
        "tasks": tasks,
    }
    args.results.write_text(json.dumps(res, indent=1), encoding="utf-8")


def best_lr(trials: list[dict]) -> tuple[float, list[dict]]:
    """The rate with the best mean dev score over seeds, and its trials."""
    by_lr: dict[float, list[dict]] = {}
    for t in trials:
        by_lr.setdefault(t["lr"], []).append(t)
    lr = max(by_lr, key=lambda k: statistics.mean(t["score"] for t in by_lr[k]))
    return lr, sorted(by_lr[lr], key=lambda t: t["seed"])


def spread(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):.1f} ± {100 * sd:.1f}"


def task_cell(task: dict) -> tuple[str, list[float], float]:
    """'metric mean ± sd / ...' at the best rate, the per-seed task scores, and that rate."""
    lr, trials = best_lr(task["trials"])
    names = [(split, metric) for split, values in trials[0]["metrics"].items() for metric in values]
    cell = " / ".join(
        f"{metric} {spread([t['metrics'][split][metric] for t in trials])}"
        for split, metric in names
    )
    return cell, [t["score"] for t in trials], lr


def pretraining(args: argparse.Namespace) -> None:
    """One MLflow pretraining run's held-out curves, parameters and times, as a JSON record for
    `report` (kept in the committed .jsonl, so the report outlives the MLflow store)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    run = client.get_run(args.run_id)
    curves = {
        key: [(m.step, m.value) for m in client.get_metric_history(args.run_id, key)]
        for key in (*CURVES, "train/mlm_loss")
    }
    stamps = [m.timestamp for m in client.get_metric_history(args.run_id, "train/loss")]
    record = {
        "name": args.name,
        "run_id": args.run_id,
        "params": run.data.params,
        "curves": curves,
        "run_s": (run.info.end_time - run.info.start_time) / 1000,
        "train_s": (max(stamps) - min(stamps)) / 1000 if stamps else None,
    }
    args.results.write_text(json.dumps(record, indent=1), encoding="utf-8")


def read_records(paths: list[Path]) -> list[dict]:
    """The records of JSON files (one each) and JSON Lines files (one per line), in order."""
    records = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            records += [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            records.append(json.loads(text))
    return records


def plot(runs: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, key in zip(axes, CURVES, strict=True):
        for i, (name, run) in enumerate(runs.items()):
            points = run["curves"][key]
            if points:  # one colour per run in every panel (MLM-only runs have no NSP curve)
                ax.plot(*zip(*points, strict=True), label=name, color=f"C{i}", marker=".")
        ax.set_title(f"held-out {key.split('/')[1].replace('_', ' ')}")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def protocol_table(results: list[dict], baseline: str) -> list[str]:
    """The dev-score table of results fine-tuned with one protocol, and gains over `baseline`."""
    tasks = [t for t in TASKS if any(t in r["tasks"] for r in results)]
    first = max(results, key=lambda r: len(r["tasks"]))
    lines = [
        "GLUE dev after fine-tuning each model with the same grid: learning rates "
        f"{', '.join(f'{x:g}' for x in first['config']['lrs'])} x seeds "
        f"{', '.join(map(str, first['config']['seeds']))}, {first['config']['epochs']} epochs, "
        f"batch {first['config']['batch_size']}, max_seq_length "
        f"{first['config']['max_seq_length']}, "
        + (
            "the classifier on the mean of the last layer (finetune_glue's pooling: mean), "
            if first["config"].get("pooling") == "mean"
            else "the classifier on the pooled [CLS] (as the paper), "
        )
        + "the best epoch on dev per trial (as finetune_glue). "
        "Per model and task, the rate with the best mean dev score over the seeds; cells are "
        "mean ± standard deviation over the seeds at that rate (x100). Train sets: "
        + ", ".join(f"{t} {first['tasks'][t]['train']:,}" for t in tasks)
        + (
            f" (at most {first['config']['max_train']:,} examples, the same seeded subsample "
            "for every model)"
            if first["config"]["max_train"]
            else ""
        )
        + "; dev sets complete.",
        "",
        "| model | " + " | ".join(tasks) + " | average | fine-tuning CPU time |",
        "|---|" + "---|" * len(tasks) + "---:|---:|",
    ]
    averages: dict[str, list[float]] = {}
    for r in results:
        cells, per_seed = [], []
        for t in tasks:
            if t not in r["tasks"]:  # a model fine-tuned on fewer tasks: no average
                cells.append("-")
                continue
            cell, scores, lr = task_cell(r["tasks"][t])
            cells.append(f"{cell} (lr {lr:g})")
            per_seed.append(scores)
        average = "-"
        if len(per_seed) == len(tasks):
            averages[r["name"]] = [statistics.mean(s) for s in zip(*per_seed, strict=True)]
            average = spread(averages[r["name"]])
        minutes = sum(r["tasks"][t]["cpu_s"] for t in tasks if t in r["tasks"]) / 60
        row = " | ".join([r["name"], *cells, average, f"{minutes:.0f} min"])
        lines.append(f"| {row} |")
    lines += epoch_curves(results, tasks)
    lines += ["", "Models:", ""]
    lines += [f"- {r['name']}: {r['source']}; measured with `{r['command']}`" for r in results]
    if baseline in averages:
        base = statistics.mean(averages[baseline])
        base_tasks = next(r for r in results if r["name"] == baseline)
        lines += ["", f"Against {baseline} (mean over seeds):", ""]
        for r in results:
            if r["name"] == baseline:
                continue
            parts = []
            if r["name"] in averages and len(tasks) > 1:
                gain = 100 * (statistics.mean(averages[r["name"]]) - base)
                parts.append(f"{len(tasks)}-task average {gain:+.1f} points")
            if "stsb" in r["tasks"] and "stsb" in base_tasks["tasks"]:
                gain = 100 * (stsb_pearson(r) - stsb_pearson(base_tasks))
                parts.append(f"STS-B Pearson {gain:+.1f} points")
            lines.append(f"- {r['name']}: {', '.join(parts)}.")
    return lines


def epoch_curves(results: list[dict], tasks: list[str]) -> list[str]:
    """Dev score after each epoch (mean over seeds at the table's rate), where it was recorded:
    whether a model was still improving when its fine-tuning schedule ended."""
    lines = []
    for t in tasks:
        for r in results:
            if t not in r["tasks"]:
                continue
            lr, trials = best_lr(r["tasks"][t]["trials"])
            if not all("curve" in x for x in trials):
                continue
            curve = [
                100 * statistics.mean(c) for c in zip(*(x["curve"] for x in trials), strict=True)
            ]
            lines.append(f"- {t}, {r['name']} (lr {lr:g}): " + ", ".join(f"{v:.1f}" for v in curve))
    return (
        [
            "",
            "Dev selection score after each epoch (as finetune_glue: the mean of a task's "
            "metrics), mean over the seeds at the table's rate (x100):",
            "",
            *lines,
        ]
        if lines
        else []
    )


def protocol_of(result: dict) -> tuple:
    """Results are compared only with results of the same fine-tuning protocol (records from
    before the `pooling` option read the pooled [CLS])."""
    c = {"pooling": "cls", **result["config"]}
    keys = ("epochs", "batch_size", "pooling", "lrs", "seeds", "max_seq_length", "max_train")
    return tuple(str(c[k]) for k in keys)


def merge_results(records: list[dict]) -> list[dict]:
    """One record per model and protocol: the tasks of records run by separate commands (one
    process per task, side by side) are merged, and a later record's task replaces an earlier
    one, so a report can start from the committed .jsonl and add a file it already holds."""
    merged: dict[tuple, dict] = {}
    for r in records:
        key = (r["name"], protocol_of(r))
        if key not in merged:
            merged[key] = {**r, "tasks": dict(r["tasks"])}
            continue
        into = merged[key]
        into["tasks"].update(r["tasks"])
        if r["command"] not in into["command"].split("` and `"):
            into["command"] += f"` and `{r['command']}"
        into["finished"] = max(into["finished"], r["finished"])
    return list(merged.values())


def report(args: argparse.Namespace) -> None:
    records = read_records(args.inputs)
    results = merge_results([r for r in records if "tasks" in r])
    probes = list({r["name"]: r for r in records if "layers" in r}.values())
    runs = {r["name"]: r for r in records if "curves" in r}
    picture = OUT.with_suffix(".png")
    if runs:
        plot(runs, picture)
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault(protocol_of(r), []).append(r)
    lines = ["# Does pretraining pay off? (benchmarks/experiments/pretraining_value.py)", ""]
    for group in groups.values():
        if len(groups) > 1:
            c = group[0]["config"]
            head = ", mean-pooled head" if c.get("pooling") == "mean" else ""
            lines += [f"## {c['epochs']} epochs, batch {c['batch_size']}{head}", ""]
        lines += [*protocol_table(group, args.baseline), ""]
    if probes:
        lines += probe_table(probes)
    first = results[0]
    if runs:
        lines += [
            "## Pretraining",
            "",
            "| run | MLflow run | steps | training time | whole run | held-out MLM accuracy "
            "| MLM loss | NSP accuracy |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, run in runs.items():
            last = {k: (v[-1][1] if v else None) for k, v in run["curves"].items()}
            nsp = f"{last['val/nsp_accuracy']:.3f}" if last["val/nsp_accuracy"] else "-"
            steps = run["curves"]["val/mlm_accuracy"][-1][0]
            lines.append(
                f"| {name} | {run['run_id'][:8]} | {steps} | {run['train_s'] / 60:.0f} min | "
                f"{run['run_s'] / 60:.0f} min | {last['val/mlm_accuracy']:.3f} | "
                f"{last['val/mlm_loss']:.2f} | {nsp} |"
            )
        lines += ["", f"![pretraining curves]({picture.name})"]
    lines += [
        "",
        f"Machine: {first['cpu']}; fine-tuning at {first['threads']} torch thread(s) per process; "
        "its time is the process's CPU time (the runs shared the 2 cores with each other).",
    ]
    if args.note:
        lines += ["", args.note.read_text(encoding="utf-8").strip()]
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    every = [*results, *probes, *runs.values()]
    OUT.with_suffix(".jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in every), encoding="utf-8"
    )
    print(OUT.read_text())


def stsb_pearson(result: dict) -> float:
    _, trials = best_lr(result["tasks"]["stsb"]["trials"])
    return statistics.mean(t["metrics"]["dev"]["pearson"] for t in trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ft = sub.add_parser("finetune")
    pr = sub.add_parser("probe")
    for command in (ft, pr):
        command.add_argument("--name", required=True)
        which = command.add_mutually_exclusive_group(required=True)
        which.add_argument("--model", type=Path, help="HF-format folder (config, weights, vocab)")
        which.add_argument("--random-like", type=Path, help="random init of this folder's config")
        command.add_argument("--init-seed", type=int, default=0)
        command.add_argument("--glue-dir", type=Path, default=DEFAULT_GLUE)
        command.add_argument("--max-train-examples", type=int, default=None)
        command.add_argument("--threads", type=int, default=2)
        command.add_argument("--results", type=Path, required=True)
    ft.add_argument("--tasks", nargs="+", default=TASKS)
    ft.add_argument("--lrs", type=float, nargs="+", default=[1e-4, 3e-4, 1e-3])
    ft.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ft.add_argument("--epochs", type=int, default=3)
    ft.add_argument("--batch-size", type=int, default=32)
    ft.add_argument("--max-seq-length", type=int, default=128)
    ft.add_argument(
        "--pooling", choices=CLASSIFIER_POOLINGS, default="cls", help="what the head reads"
    )
    ft.add_argument("--resume", action="store_true", help="keep --results' finished tasks")
    pt = sub.add_parser("pretraining")
    pt.add_argument("--name", required=True)
    pt.add_argument("--run-id", required=True, help="the MLflow run of `kedro run ... pretrain`")
    pt.add_argument("--results", type=Path, required=True)
    rep = sub.add_parser("report")
    rep.add_argument(
        "--inputs",
        type=Path,
        nargs="+",
        required=True,
        help="files written by finetune, probe and pretraining, or a report's .jsonl",
    )
    rep.add_argument("--baseline", default="random")
    rep.add_argument("--note", type=Path, help="a Markdown file appended to the report")
    args = parser.parse_args()
    commands = {"finetune": finetune, "probe": probe, "pretraining": pretraining, "report": report}
    commands[args.command](args)


if __name__ == "__main__":
    main()
