"""SQuAD v1.1 on the real data (../shared/data/squad: the 44-article train slice, the full
official dev set): our fine-tuning and transformers' question-answering recipe side by side.

    python benchmarks/squad.py finetune --side ours --results benchmarks/squad.jsonl
    python benchmarks/squad.py finetune --side hf --results benchmarks/squad.jsonl

(squad.md's rows: `--epochs 1 --max-seq-length 256 --doc-stride 128 --threads 1`, both sides
side by side: about 2 h each on one core of the project's CPU.)
    python benchmarks/squad.py report --results benchmarks/squad.jsonl --out benchmarks/squad.md

`--side hf` is AutoModelForQuestionAnswering + Trainer on the same checkpoint, questions,
hyperparameters and seed, with run_qa.py's windows (the tokenizer's overflowing tokens with
`stride=doc_stride`, truncating only the context) and labels; its start/end logits go through
the same n-best search and official EM/F1 as ours, so the two differ only in training.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import tempfile
import time
from pathlib import Path

import torch
from common import SHARED_DATA, minilm_dir, read_jsonl, training_arguments

from bert_pipeline.model.checkpoint import read_checkpoint
from bert_pipeline.squad.config import SquadConfig
from bert_pipeline.squad.data import read_squad
from bert_pipeline.squad.evaluation import best_answers, squad_metrics
from bert_pipeline.squad.features import Window, answer_tokens
from bert_pipeline.squad.finetune import finetune_squad

SQUAD = SHARED_DATA / "squad"


def tables(args):
    train = read_squad(args.squad_dir / "train-v1.1-slice.json")
    dev = read_squad(args.squad_dir / "dev-v1.1.json")
    if args.max_train_questions:
        train = train.head(args.max_train_questions)
    if args.max_dev_questions:
        dev = dev.head(args.max_dev_questions)
    return train.reset_index(drop=True), dev.reset_index(drop=True)


def run_ours(args) -> dict:
    train, dev = tables(args)
    config = SquadConfig(
        learning_rates=[args.learning_rate],
        seeds=[args.seed],
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        doc_stride=args.doc_stride,
        progress_bar=False,
    )
    start = time.perf_counter()
    result = finetune_squad(train, dev, read_checkpoint(args.model_dir), config)
    history = result.record["trials"][0]["history"]
    return {
        "dev": result.record["dev_metrics"],
        "history": [h["metrics"]["dev"]["f1"] for h in history],
        "windows": result.record["windows"],
        "wall_s": time.perf_counter() - start,
    }


def run_hf(args) -> dict:
    """run_qa.py's features and Trainer; our answer search and metrics on its logits."""
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        set_seed,
    )

    train, dev = tables(args)
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)

    def encode(frame, labelled: bool) -> tuple[list[dict], list[Window]]:
        enc = tokenizer(
            frame["question"].tolist(),
            frame["context"].tolist(),
            truncation="only_second",
            max_length=args.max_seq_length,
            stride=args.doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        rows, windows = [], []
        for i, example in enumerate(enc["overflow_to_sample_mapping"]):
            sequence = enc.sequence_ids(i)
            offsets = [
                tuple(o) if s == 1 else None
                for o, s in zip(enc["offset_mapping"][i], sequence, strict=True)
            ]
            s_tok = e_tok = 0
            texts, starts = frame["answer_texts"][example], frame["answer_starts"][example]
            if labelled and len(texts):
                s_tok, e_tok = answer_tokens(offsets, starts[0], starts[0] + len(texts[0]))
            rows.append(
                {
                    "input_ids": enc["input_ids"][i],
                    "token_type_ids": enc["token_type_ids"][i],
                    "attention_mask": enc["attention_mask"][i],
                    "start_positions": s_tok,
                    "end_positions": e_tok,
                }
            )
            windows.append(Window(enc["input_ids"][i], [], s_tok, e_tok, example, offsets))
        return rows, windows

    train_rows, _ = encode(train, True)
    dev_rows, dev_windows = encode(dev, False)
    set_seed(args.seed)
    model = AutoModelForQuestionAnswering.from_pretrained(args.model_dir, dtype=torch.float32)
    steps = math.ceil(len(train_rows) / args.batch_size) * args.epochs
    history = []
    with tempfile.TemporaryDirectory() as out:
        targs = training_arguments(
            out,
            learning_rate=args.learning_rate,
            batch_size=args.batch_size,
            epochs=args.epochs,
            total_steps=steps,
            seed=args.seed,
            per_device_eval_batch_size=64,
            logging_strategy="epoch",
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model,
            args=targs,
            train_dataset=train_rows,
            data_collator=DataCollatorWithPadding(tokenizer),
        )
        trainer.train()
        eval_rows = [
            {k: r[k] for k in ("input_ids", "token_type_ids", "attention_mask")} for r in dev_rows
        ]
        logits = trainer.predict(eval_rows).predictions
    lengths = [len(r["input_ids"]) for r in dev_rows]
    starts = [row[:n] for row, n in zip(logits[0], lengths, strict=True)]
    ends = [row[:n] for row, n in zip(logits[1], lengths, strict=True)]
    answers, _ = best_answers(dev, dev_windows, starts, ends)
    metrics, _ = squad_metrics(dev, answers)
    history.append(metrics["f1"])
    windows = {"train": len(train_rows), "dev": len(dev_rows)}
    return {
        "dev": metrics,
        "history": history,
        "windows": windows,
        "wall_s": time.perf_counter() - start,
    }


def report(args) -> None:
    rows = read_jsonl(Path(args.results))
    lines = [
        "# SQuAD v1.1",
        "",
        "Trained on the 44-article train slice (11,877 questions) of ../shared/data/squad,",
        "evaluated on the full official dev set (10,570 questions) with the official EM/F1",
        "normalisation. Written by `benchmarks/squad.py report` from `squad.jsonl`.",
        "",
        "| model | side | lr | epochs | batch | max_seq_length / doc_stride | train windows "
        "| dev EM | dev F1 | wall |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['side']} | {r['learning_rate']:g} | {r['epochs']} "
            f"| {r['batch_size']} | {r['max_seq_length']} / {r['doc_stride']} "
            f"| {r['windows']['train']} | {r['dev']['exact_match']:.1f} | {r['dev']['f1']:.1f} "
            f"| {r['wall_s'] / 60:.0f} min ({r['threads']} threads) |"
        )
    if args.note:
        lines += ["", args.note]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(Path(args.out).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("finetune")
    p.add_argument("--side", choices=("ours", "hf"), default="ours")
    p.add_argument("--model-dir", type=Path, default=None, help="default: all-MiniLM-L6-v2")
    p.add_argument("--model-name", default="all-MiniLM-L6-v2")
    p.add_argument("--squad-dir", type=Path, default=SQUAD)
    p.add_argument("--max-train-questions", type=int, default=None)
    p.add_argument("--max-dev-questions", type=int, default=None)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-length", type=int, default=384)
    p.add_argument("--doc-stride", type=int, default=128)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--results", type=Path, required=True)
    p = sub.add_parser("report")
    p.add_argument("--results", type=Path, required=True)
    p.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".md"))
    p.add_argument("--note", default="")
    args = parser.parse_args()
    if args.command == "report":
        report(args)
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    args.model_dir = args.model_dir or minilm_dir()
    outcome = run_hf(args) if args.side == "hf" else run_ours(args)
    record = {
        "side": "transformers" if args.side == "hf" else "ours",
        "model": args.model_name,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "doc_stride": args.doc_stride,
        "train_questions": args.max_train_questions,
        "dev_questions": args.max_dev_questions,
        "threads": torch.get_num_threads(),
        "machine": platform.node(),
        **outcome,
    }
    print(json.dumps(record), flush=True)
    with args.results.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
