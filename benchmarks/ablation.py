"""The paper's Table 5 (pretraining tasks) and Figure 5 (fine-tuning vs pretraining steps), run
through the project's own commands: this tool only calls `kedro run` and collects.

Rows: `bert` (MLM + NSP), `no_nsp` (MLM only), `ltr` (LTR & No NSP: a left-to-right LM, causal at
fine-tuning too) and `ltr_bilstm` (the `ltr` model with a randomly initialised BiLSTM between the
encoder and each task head). Every row fine-tunes with the same protocol: each (learning rate,
seed) is one `kedro run` of one trial, the learning rate with the best mean dev score over the
seeds is kept, and a cell is that mean and its standard deviation over the seeds.

    # pretrain each row with the budget recipe (resumes a row whose run was cut off)
    python benchmarks/ablation.py pretrain --work /data/ablation --rows bert no_nsp ltr
    # GLUE tasks and the SQuAD slice for every row, three seeds
    python benchmarks/ablation.py finetune --work /data/ablation --seeds 1 2 3
    # Figure 5: one task fine-tuned from every kept pretraining checkpoint of bert and ltr
    python benchmarks/ablation.py curve --work /data/ablation --task mrpc
    python benchmarks/ablation.py report --work /data/ablation

`--env` (default budget) and `--set key=value` (any runtime parameter, repeatable) reach every
`kedro run`; the reports name them. Data: ../shared/data/glue and ../shared/data/squad.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, SHARED_DATA, command_line, cpu_name, kedro_run_command, mean_sd

OUT = Path(__file__).with_suffix(".md")
NO_NSP = {"pretrain_data.examples.next_sentence": "false"}
# row -> (the row whose pretrained model it fine-tunes, pretraining parameters, head parameters)
ROWS = {
    "bert": ("bert", {}, {"classifier_pooling": "cls"}),
    # MLM alone never trains [CLS]: the mean of the last layer (docs/training.md)
    "no_nsp": ("no_nsp", NO_NSP, {"classifier_pooling": "mean"}),
    "ltr": ("ltr", {**NO_NSP, "pretrain_model.objective": "ltr"}, {"classifier_pooling": "last"}),
    "ltr_bilstm": ("ltr", None, {"head_lstm_size": "128"}),
}
LABELS = {
    "bert": "BERT (MLM + NSP)",
    "no_nsp": "No NSP",
    "ltr": "LTR & No NSP",
    "ltr_bilstm": "+ BiLSTM",
}
SQUAD = "squad"
SQUAD_FILES = {"squad_train": "train-v1.1-slice.json", "squad_dev": "dev-v1.1.json"}


def pipeline_of(task: str) -> tuple[str, list[str]]:
    """The pipeline that fine-tunes `task`, and its extra `kedro run` arguments."""
    return ("finetune_squad", []) if task == SQUAD else ("finetune_glue", [f"--namespaces={task}"])


def kedro_run(
    args: argparse.Namespace, pipeline: str, extra: list[str], params: dict, log: Path
) -> None:
    """One `kedro run` from the checkout's root; its output to `log`, a failure names it."""
    settings = dict(item.split("=", 1) for item in args.set)
    params = {**params, **settings}
    command = kedro_run_command(pipeline, params, "--env", args.env, *extra)
    log.parent.mkdir(parents=True, exist_ok=True)
    print(shlex.join(command), flush=True)
    with log.open("w") as out:
        code = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    if code:
        sys.exit(f"failed ({code}): {shlex.join(command)}; see {log}")


def model_dir(work: Path, row: str) -> Path:
    return work / ROWS[row][0] / "06_models" / "bert_pretrained"


def pretrain(args: argparse.Namespace) -> None:
    for row in args.rows:
        source, params, _ = ROWS[row]
        if params is None or source != row:
            sys.exit(f"row {row} fine-tunes the {source} model: pretrain {source}")
        data = args.work / row
        if model_dir(args.work, row).is_dir():
            print(f"{row}: pretrained already ({model_dir(args.work, row)})")
            continue
        resume = (data / "06_models" / "pretrain_checkpoints" / "last.ckpt").exists()
        started = time.time()
        kedro_run(
            args,
            "pretrain",
            [],
            {
                "data_dir": data,
                **params,
                "pretrain_model.keep_checkpoints": "true",
                "pretrain_model.resume": "true" if resume else "false",
            },
            args.work / "logs" / f"pretrain_{row}.txt",
        )
        (data / "ablation_pretrain.json").write_text(
            json.dumps({"row": row, "seconds": time.time() - started, "resumed": resume})
        )


def task_params(task: str, model: Path, head: dict, lr: str, seed: int, data: Path) -> dict:
    """The runtime parameters of one trial of `task` (a GLUE task or SQuAD)."""
    if task == SQUAD:  # a span head reads every token: no classifier_pooling
        root = "finetune_squad.training"
        files = {"squad_dir": SHARED_DATA / "squad", **SQUAD_FILES, "squad_model_dir": model}
        head = {k: v for k, v in head.items() if k != "classifier_pooling"}
    else:
        root = "finetune_glue.defaults"
        files = {"glue_raw_dir": SHARED_DATA / "glue", "glue_model_dir": model}
    trial = {"learning_rates": f"[{lr}]", "seeds": f"[{seed}]", "progress_bar": "false", **head}
    return {"data_dir": data, **files, **{f"{root}.{k}": v for k, v in trial.items()}}


def trial_record(task: str, data: Path) -> Path:
    if task == SQUAD:
        return data / "08_reporting" / "squad_metrics.json"
    return data / "08_reporting" / "glue" / task / "dev_metrics.json"


def finetune(args: argparse.Namespace) -> None:
    for row in args.rows:
        model = model_dir(args.work, row)
        if not model.is_dir():
            sys.exit(f"row {row}: no pretrained model at {model}; run `pretrain` first")
        for task in args.tasks:
            for lr in args.lrs:
                for seed in args.seeds:
                    data = args.work / "finetune" / row / task / f"lr{lr}_seed{seed}"
                    if trial_record(task, data).is_file():
                        continue
                    params = task_params(task, model, ROWS[row][2], lr, seed, data)
                    kedro_run(args, *pipeline_of(task), params, data / "log.txt")


def export_checkpoints(row: str, work: Path) -> list[tuple[int, Path]]:
    """Every kept pretraining checkpoint of `row` as an HF folder (with the row's tokenizer)."""
    import torch

    from bert_pipeline.data.tokenizer import load_tokenizer
    from bert_pipeline.model import BertConfig, BertForPreTraining
    from bert_pipeline.model.checkpoint import model_to_checkpoint, write_checkpoint

    data = work / row
    config = json.loads((model_dir(work, row) / "config.json").read_text())
    tokenizer = load_tokenizer(data / "06_models" / "tokenizer")
    out = []
    for path in sorted((data / "06_models" / "pretrain_checkpoints").glob("step-*.ckpt")):
        step = int(path.stem.split("-")[1])
        folder = work / "curve" / row / f"step-{step}"
        if not folder.is_dir():
            state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
            model = BertForPreTraining(BertConfig.from_dict(config))
            model.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("model.")})
            write_checkpoint(model_to_checkpoint(model, tokenizer), folder)
        out.append((step, folder))
    return sorted(out)


def curve(args: argparse.Namespace) -> None:
    for row in args.rows:
        for step, folder in export_checkpoints(row, args.work):
            data = args.work / "curve_finetune" / row / f"step-{step}"
            if trial_record(args.task, data).is_file():
                continue
            params = task_params(args.task, folder, ROWS[row][2], args.lrs[0], args.seeds[0], data)
            kedro_run(args, *pipeline_of(args.task), params, data / "log.txt")


def trial_score(task: str, record: dict) -> float:
    """The trial's dev score as its pipeline chose it: GLUE's task score, SQuAD's F1."""
    if task == SQUAD:
        return record["dev_metrics"]["f1"]
    return record["score"] * 100


def cell(scores: dict[str, list[float]]) -> tuple[str, float]:
    """The learning rate with the best mean over seeds: 'mean +- sd (lr, n)'."""
    lr, values = max(scores.items(), key=lambda kv: statistics.fmean(kv[1]))
    mean, sd = mean_sd(values)
    return f"{mean:.1f} +- {sd:.1f} (lr {lr}, n={len(values)})", mean


def report(args: argparse.Namespace) -> None:
    rows, tasks = [], []
    results: dict[tuple[str, str], dict[str, list[float]]] = {}
    for path in sorted((args.work / "finetune").glob("*/*/*/")):
        row, task, trial = path.relative_to(args.work / "finetune").parts
        record = trial_record(task, path)
        if not record.is_file():
            continue
        lr = trial.split("_")[0].removeprefix("lr")
        score = trial_score(task, json.loads(record.read_text()))
        results.setdefault((row, task), {}).setdefault(lr, []).append(score)
        rows += [row] if row not in rows else []
        tasks += [task] if task not in tasks else []
    rows = [r for r in ROWS if r in rows]
    lines = [
        "# Table 5 and Figure 5 at the budget scale (benchmarks/ablation.py)",
        "",
        f"Command: `{command_line('benchmarks/ablation.py')}`; {time.strftime('%Y-%m-%d')}; "
        f"{cpu_name()}, {os.cpu_count()} cores.",
        "",
        "Dev scores x100 (GLUE: each task's score; SQuAD: F1), mean +- sd over seeds at the "
        "learning rate with the best mean.",
        "",
        "| pretraining | " + " | ".join(tasks) + " |",
        "|---|" + "---:|" * len(tasks),
    ]
    for row in rows:
        cells = [cell(results[row, t])[0] if (row, t) in results else "-" for t in tasks]
        lines.append(f"| {LABELS[row]} | " + " | ".join(cells) + " |")
    points = curve_points(args.work)
    if points:
        lines += ["", "Figure 5: dev score against pretraining steps", "", "| row | step | score |"]
        lines += ["|---|---:|---:|"]
        lines += [f"| {LABELS[r]} | {s} | {v:.1f} |" for r, pts in points.items() for s, v in pts]
        plot(points, args.out.with_suffix(".png"))
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def curve_points(work: Path) -> dict[str, list[tuple[int, float]]]:
    points: dict[str, list[tuple[int, float]]] = {}
    for path in sorted((work / "curve_finetune").glob("*/step-*")):
        row, step = path.parent.name, int(path.name.split("-")[1])
        for task in [SQUAD, *(p.name for p in (path / "08_reporting" / "glue").glob("*"))]:
            record = trial_record(task, path)
            if record.is_file():
                score = trial_score(task, json.loads(record.read_text()))
                points.setdefault(row, []).append((step, score))
    return {row: sorted(pts) for row, pts in points.items()}


def plot(points: dict[str, list[tuple[int, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for row, pts in points.items():
        ax.plot([s for s, _ in pts], [v for _, v in pts], marker="o", label=LABELS[row])
    ax.set_xlabel("pretraining steps")
    ax.set_ylabel("dev score")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["pretrain", "finetune", "curve", "report"])
    parser.add_argument("--work", type=Path, required=True, help="folder of every run's data")
    parser.add_argument("--rows", nargs="+", default=None, choices=list(ROWS))
    parser.add_argument("--tasks", nargs="+", default=["mrpc", "sst2", "stsb", "rte", SQUAD])
    parser.add_argument("--task", default="mrpc", help="the curve's task")
    parser.add_argument("--lrs", nargs="+", default=["1e-4", "3e-4", "1e-3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--env", default="budget")
    parser.add_argument("--set", action="append", default=[], help="key=value for every run")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    defaults = {
        "pretrain": ["bert", "no_nsp", "ltr"],
        "finetune": list(ROWS),
        "curve": ["bert", "ltr"],
        "report": list(ROWS),
    }
    args.rows = args.rows or defaults[args.command]
    {"pretrain": pretrain, "finetune": finetune, "curve": curve, "report": report}[args.command](
        args
    )


if __name__ == "__main__":
    main()
