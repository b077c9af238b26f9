"""Parity check of our GLUE fine-tuning against transformers' Trainer (project issue #5).

For every task and seed it runs, each in its own process, `finetune_task` (the function the
finetune_glue pipeline nodes call) and benchmarks/hf_glue_reference.py with identical
hyperparameters, seed and train set, and appends one JSON line per run to `--results`.
`--report` turns that file into the markdown table of glue_parity.md (metrics of the last
epoch, as Trainer ends, plus the largest per-epoch gap between the two sides).

    python benchmarks/glue_parity.py --tasks rte mrpc stsb cola --seeds 42 \\
        --epochs 3 --results /tmp/glue_parity/results.jsonl
    python benchmarks/glue_parity.py --report --results /tmp/glue_parity/results.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import mean

from common import (
    DEFAULT_GLUE,
    RECIPE,
    Encoded,
    load_tables,
    minilm_dir,
    read_jsonl,
    training_arguments,
)

HERE = Path(__file__).resolve().parent


def run_ours(args: argparse.Namespace) -> dict:
    """One fine-tuning through bert_pipeline.glue.finetune.finetune_task."""
    import torch

    from bert_pipeline.glue.config import GlueConfig
    from bert_pipeline.glue.finetune import finetune_task
    from bert_pipeline.model.checkpoint import read_checkpoint

    if args.threads:
        torch.set_num_threads(args.threads)
    task, train, dev = load_tables(
        args.glue_dir, args.tasks[0], args.max_train_examples, args.sample_seed
    )
    config = GlueConfig(
        learning_rates=[args.learning_rate],
        seeds=[args.seeds[0]],
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        progress_bar=False,
    )
    start = time.perf_counter()
    checkpoint = read_checkpoint(args.model_dir)
    result = finetune_task(
        task,
        train,
        dev,
        dev.head(0),
        checkpoint,
        config,
        source=str(args.model_dir),
    )
    wall = time.perf_counter() - start
    trial = result.trials[0]
    return {
        "side": "ours",
        "task": task.name,
        "seed": args.seeds[0],
        "learning_rate": args.learning_rate,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "train_examples": len(train),
        "dev_examples": len(dev),
        "threads": torch.get_num_threads(),
        "history": [
            {"epoch": h["epoch"], "metrics": h["metrics"]["dev"]} for h in trial["history"]
        ],
        "best_epoch": trial["best_epoch"],
        "wall_s": wall,
    }


def step_check(args: argparse.Namespace) -> dict:
    """Same start weights, same batch order, dropout off: per-step train losses of both loops.

    Ours is GlueModule (optimizer groups, schedule, loss) under a Lightning Trainer set up as
    finetune_task sets it; the reference is transformers' Trainer with a sequential sampler. With
    seed noise removed, any gap comes from the optimizer, schedule, clipping or model.
    """
    import torch
    from torch.utils.data import DataLoader, SequentialSampler
    from transformers import BertForSequenceClassification, Trainer

    from bert_pipeline.glue.config import GlueConfig
    from bert_pipeline.glue.features import GlueFeatures, encode_table
    from bert_pipeline.glue.finetune import build_classifier, tokenizer_from_checkpoint
    from bert_pipeline.glue.module import GlueModule
    from bert_pipeline.model.checkpoint import read_checkpoint
    from bert_pipeline.training.config import TrialParams
    from bert_pipeline.training.core import build_trainer

    torch.set_num_threads(args.threads)
    task, train, _ = load_tables(
        args.glue_dir, args.tasks[0], args.max_train_examples, args.sample_seed
    )
    checkpoint = read_checkpoint(args.model_dir)
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    checkpoint = {**checkpoint, "config": {**checkpoint["config"], **no_dropout}}
    torch.manual_seed(args.seeds[0])
    ours = build_classifier(checkpoint, task, str(args.model_dir))
    start_state = {k: v.clone() for k, v in ours.state_dict().items()}
    hf = BertForSequenceClassification.from_pretrained(
        args.model_dir, num_labels=task.num_labels, dtype=torch.float32, **no_dropout
    )
    hf.load_state_dict(start_state)
    tokenizer = tokenizer_from_checkpoint(checkpoint, str(args.model_dir), lowercase=True)
    encoded = encode_table(tokenizer, train, args.max_seq_length)
    features = GlueFeatures(encoded, train["label"], task.is_regression)
    steps = -(-len(features) // args.batch_size) * args.epochs

    ours_losses: list[float] = []

    class Recording(GlueModule):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            ours_losses.append(loss.item())
            return loss

    trial = TrialParams(
        args.learning_rate, args.seeds[0], RECIPE.weight_decay, RECIPE.warmup_proportion
    )
    module = Recording(ours, task, ["dev"], trial)
    loader = DataLoader(features, args.batch_size, shuffle=False, collate_fn=features.collate)
    devices = GlueConfig(accelerator="cpu", progress_bar=False)  # as finetune_task's
    build_trainer(devices, max_epochs=args.epochs).fit(module, train_dataloaders=loader)

    hf_losses: list[float] = []

    class SequentialTrainer(Trainer):
        def _get_train_sampler(self, train_dataset=None):
            return SequentialSampler(train_dataset or self.train_dataset)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            hf_losses.append((out[0] if return_outputs else out).item())
            return out

    cast = float if task.is_regression else int
    dataset = Encoded(
        {
            "input_ids": [e["input_ids"] for e in encoded],
            "token_type_ids": [e["token_type_ids"] for e in encoded],
            "attention_mask": [[1] * len(e["input_ids"]) for e in encoded],
        },
        [cast(v) for v in train["label"]],
    )
    with tempfile.TemporaryDirectory() as out_dir:
        SequentialTrainer(
            model=hf,
            args=training_arguments(
                out_dir,
                learning_rate=args.learning_rate,
                batch_size=args.batch_size,
                epochs=args.epochs,
                total_steps=steps,
                seed=args.seeds[0],
                disable_tqdm=True,
            ),
            train_dataset=dataset,
            data_collator=lambda rows: features.collate(
                [{**r, "label": r["labels"]} for r in rows]
            ),
        ).train()
    ours_state, hf_state = ours.state_dict(), hf.state_dict()
    weight_gap = max((ours_state[k] - hf_state[k]).abs().max().item() for k in ours_state)
    return {
        "task": task.name,
        "steps": steps,
        "ours_losses": ours_losses,
        "hf_losses": hf_losses,
        "max_loss_gap": max(abs(a - b) for a, b in zip(ours_losses, hf_losses, strict=True)),
        "max_final_weight_gap": weight_gap,
    }


def job_commands(args: argparse.Namespace) -> list[list[str]]:
    """One command per (task, seed, side): ours through this script, HF through the reference."""
    common = [
        "--glue-dir", str(args.glue_dir), "--model-dir", str(args.model_dir),
        "--sample-seed", str(args.sample_seed), "--learning-rate", str(args.learning_rate),
        "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
        "--max-seq-length", str(args.max_seq_length), "--threads", str(args.threads),
    ]  # fmt: skip
    if args.max_train_examples is not None:
        common += ["--max-train-examples", str(args.max_train_examples)]
    out = []
    for task in args.tasks:
        for seed in args.seeds:
            for side in args.sides:
                if side == "ours":
                    cmd = [sys.executable, str(HERE / "glue_parity.py"), "--side", "ours"]
                    cmd += ["--tasks", task, "--seeds", str(seed)]
                else:
                    cmd = [sys.executable, str(HERE / "hf_glue_reference.py")]
                    cmd += ["--task", task, "--seed", str(seed)]
                out.append(cmd + common)
    return out


def run_job(cmd: list[str], results: Path) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"FAILED ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}", flush=True)
        return
    line = done.stdout.strip().splitlines()[-1]
    json.loads(line)
    with results.open("a", encoding="utf-8") as f:
        f.write(line + "\n")
    print(line, flush=True)


def fmt(value: float) -> str:
    return f"{100 * value:.1f}"


def report(results: Path) -> str:
    """Markdown table: per task and metric, last-epoch dev metric per side (seed means)."""
    runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in read_jsonl(results):
        runs[(record["task"], record["side"])].append(record)
    tasks = list(dict.fromkeys(task for task, _ in runs))
    header = ["task", "metric", "ours", "HF Trainer", "diff", "ours wall s", "HF wall s"]
    header += ["seeds", "per seed ours / HF", "max epoch gap", "train / dev"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for task in tasks:
        ours, hf = runs.get((task, "ours"), []), runs.get((task, "hf"), [])
        seeds = sorted({r["seed"] for r in ours} & {r["seed"] for r in hf})
        if not seeds:
            continue
        ours = sorted((r for r in ours if r["seed"] in seeds), key=lambda r: r["seed"])
        hf = sorted((r for r in hf if r["seed"] in seeds), key=lambda r: r["seed"])
        for metric in ours[0]["history"][-1]["metrics"]:
            a = [r["history"][-1]["metrics"][metric] for r in ours]
            b = [r["history"][-1]["metrics"][metric] for r in hf]
            gap = max(
                abs(x["metrics"][metric] - y["metrics"][metric])
                for o, h in zip(ours, hf, strict=True)
                for x, y in zip(o["history"], h["history"], strict=True)
            )
            cells = [
                task,
                metric,
                fmt(mean(a)),
                fmt(mean(b)),
                f"{round(100 * (mean(a) - mean(b)), 2) + 0.0:+.2f}",  # + 0.0: no "-0.00"
                f"{mean(r['wall_s'] for r in ours):.0f}",
                f"{mean(r['wall_s'] for r in hf):.0f}",
                ", ".join(map(str, seeds)),
                ", ".join(fmt(v) for v in a) + " / " + ", ".join(fmt(v) for v in b),
                f"{100 * gap:.2f}",
                f"{ours[0]['train_examples']} / {ours[0]['dev_examples']}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["rte", "mrpc", "stsb", "cola"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--sides", nargs="+", default=["ours", "hf"], choices=["ours", "hf"])
    parser.add_argument("--glue-dir", type=Path, default=DEFAULT_GLUE)
    parser.add_argument("--model-dir", type=Path, default=None, help="default: MiniLM package")
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--results", type=Path, default=Path("/tmp/glue_parity/results.jsonl"))
    parser.add_argument("--side", choices=["ours"], help=argparse.SUPPRESS)
    parser.add_argument("--report", action="store_true", help="print the table and exit")
    parser.add_argument(
        "--step-check",
        action="store_true",
        help="compare per-step losses of both loops (same weights and batches, no dropout)",
    )
    args = parser.parse_args()
    if args.report:
        print(report(args.results))
        return
    if args.model_dir is None:
        args.model_dir = minilm_dir()
    if args.step_check:
        print(json.dumps(step_check(args)))
        return
    if args.side == "ours":
        print(json.dumps(run_ours(args)), flush=True)
        return
    args.results.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda cmd: run_job(cmd, args.results), job_commands(args)))
    print(report(args.results))


if __name__ == "__main__":
    main()
