"""NER on the real CoNLL-2003 (../shared/data/conll2003): fine-tuning, the feature-based
approach per layer choice, and transformers' token-classification recipe as the yardstick.

Each command appends one JSON line per run to `--results`; `report` writes ner.md.

    python benchmarks/ner.py finetune --side ours --results benchmarks/ner.jsonl
    python benchmarks/ner.py finetune --side ours --pack --results benchmarks/ner.jsonl
    python benchmarks/ner.py finetune --side hf --results benchmarks/ner.jsonl
    python benchmarks/ner.py features --results benchmarks/ner.jsonl
    python benchmarks/ner.py report --results benchmarks/ner.jsonl --out benchmarks/ner.md

`--side hf` is AutoModelForTokenClassification + Trainer on the same checkpoint, sentences,
hyperparameters and seed, tokenized as transformers' run_ner.py does (one sentence per
sequence, the label on the first sub-token, -100 elsewhere), scored with seqeval on the same
words; our run sees the same windows (`--pack`: a document's sentences packed per window).
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

from bert_pipeline.io.conll_dataset import ConllDataset
from bert_pipeline.model.checkpoint import read_checkpoint
from bert_pipeline.ner.config import CONLL_LABELS, LAYER_CHOICES, NerConfig, NerFeatureConfig
from bert_pipeline.ner.finetune import feature_cache, finetune_ner, train_feature_tagger
from bert_pipeline.ner.metrics import entity_metrics

CONLL = SHARED_DATA / "conll2003"


def tables(args) -> dict:
    frames = ConllDataset(CONLL_LABELS, path=str(args.conll_dir)).load()
    if args.max_train_sentences:
        frames["train"] = frames["train"].head(args.max_train_sentences)
    if args.max_eval_sentences:
        for split in ("dev", "test"):
            frames[split] = frames[split].head(args.max_eval_sentences)
    return frames


def config(args, schema: type[NerConfig] = NerConfig, **extra) -> NerConfig:
    return schema(
        learning_rates=[args.learning_rate],
        seeds=[args.seed],
        batch_size=args.batch_size,
        epochs=args.epochs,
        max_seq_length=args.max_seq_length,
        progress_bar=False,
        **extra,
    )


def record(args, side: str, mode: str, wall: float, **values) -> dict:
    return {
        "side": side,
        "mode": mode,
        "model": args.model_name,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "threads": torch.get_num_threads(),
        "machine": platform.node(),
        "wall_s": round(wall, 1),
        **values,
    }


def run_ours(args) -> dict:
    frames = tables(args)
    start = time.perf_counter()
    result = finetune_ner(
        frames["train"],
        frames["dev"],
        frames["test"],
        read_checkpoint(args.model_dir),
        config(args, pack_sentences=args.pack),
        source=str(args.model_dir),
    )
    wall = time.perf_counter() - start
    r = result.record
    mode = "finetune, packed documents" if args.pack else "finetune, one sentence per window"
    return record(
        args,
        "ours",
        mode,
        wall,
        dev=r["dev_metrics"],
        test=r["test_metrics"],
        best_epoch=r["best"]["best_epoch"],
        history=[h["metrics"]["dev"]["f1"] for h in r["trials"][0]["history"]],
        windows=r["windows"],
    )


def run_hf(args) -> dict:
    """transformers' recipe: per-sentence tokenization, AutoModelForTokenClassification, Trainer."""
    from transformers import (
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorForTokenClassification,
        Trainer,
        set_seed,
    )

    frames = tables(args)
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    label2id = {t: i for i, t in enumerate(CONLL_LABELS)}

    def encode(frame) -> list[dict]:
        enc = tokenizer(
            [list(t) for t in frame["tokens"]],
            is_split_into_words=True,
            truncation=True,
            max_length=args.max_seq_length,
        )
        rows = []
        for i, tags in enumerate(frame["tags"]):
            labels, previous = [], None
            for word in enc.word_ids(i):
                first = word is not None and word != previous
                labels.append(label2id[tags[word]] if first else -100)
                previous = word
            rows.append({"input_ids": enc["input_ids"][i], "labels": labels})
        return rows

    train, dev, test = (encode(frames[s]) for s in ("train", "dev", "test"))
    set_seed(args.seed)
    model = AutoModelForTokenClassification.from_pretrained(
        args.model_dir,
        num_labels=len(CONLL_LABELS),
        id2label=dict(enumerate(CONLL_LABELS)),
        label2id=label2id,
        dtype=torch.float32,
    )
    steps = math.ceil(len(train) / args.batch_size) * args.epochs

    def tags_of(prediction) -> tuple[list, list]:
        preds = prediction.predictions.argmax(-1)
        gold, pred = [], []
        for p_row, l_row in zip(preds, prediction.label_ids, strict=True):
            keep = l_row != -100
            gold.append([CONLL_LABELS[i] for i in l_row[keep]])
            pred.append([CONLL_LABELS[i] for i in p_row[keep]])
        return gold, pred

    def compute_metrics(prediction) -> dict:
        return entity_metrics(*tags_of(prediction))

    with tempfile.TemporaryDirectory() as out:
        targs = training_arguments(
            out,
            learning_rate=args.learning_rate,
            batch_size=args.batch_size,
            epochs=args.epochs,
            total_steps=steps,
            seed=args.seed,
            per_device_eval_batch_size=64,
            eval_strategy="epoch",
            logging_strategy="epoch",
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model,
            args=targs,
            train_dataset=train,
            eval_dataset=dev,
            data_collator=DataCollatorForTokenClassification(tokenizer),
            compute_metrics=compute_metrics,
        )
        trainer.train()
        test_metrics = entity_metrics(*tags_of(trainer.predict(test)))
    wall = time.perf_counter() - start
    history = [e["eval_f1"] for e in trainer.state.log_history if "eval_f1" in e]
    last = next(e for e in reversed(trainer.state.log_history) if "eval_f1" in e)
    dev_metrics = {k: last[f"eval_{k}"] for k in ("precision", "recall", "f1", "f1_strict")}
    return record(
        args,
        "transformers",
        "finetune, one sentence per window",
        wall,
        dev=dev_metrics,
        test=test_metrics,
        best_epoch=args.epochs - 1,
        history=history,
    )


def run_features(args) -> list[dict]:
    frames = tables(args)
    cfg = config(args, NerFeatureConfig, layer_choices=args.choices, lstm_width=args.lstm_width)
    start = time.perf_counter()
    cache = feature_cache(frames, read_checkpoint(args.model_dir), cfg, source=str(args.model_dir))
    extract = time.perf_counter() - start
    out = []
    for choice in args.choices:  # one grid per choice, so each gets its own wall time
        one = config(args, NerFeatureConfig, layer_choices=[choice], lstm_width=args.lstm_width)
        start = time.perf_counter()
        r = train_feature_tagger(frames["train"], frames["dev"], frames["test"], cache, one)
        out.append(
            record(
                args,
                "ours",
                f"feature-based: {choice}",
                time.perf_counter() - start,
                dev=r.record["dev_metrics"],
                test=r.record["test_metrics"],
                best_epoch=r.record["best"]["best_epoch"],
                history=[h["metrics"]["dev"]["f1"] for h in r.record["trials"][0]["history"]],
                extract_s=round(extract, 1),
                lstm_width=args.lstm_width,
            )
        )
        print(json.dumps(out[-1]), flush=True)
        with args.results.open("a", encoding="utf-8") as handle:  # each choice as it ends
            handle.write(json.dumps(out[-1]) + "\n")
    return out


def report(args) -> None:
    rows = read_jsonl(Path(args.results))
    lines = [
        "# NER on CoNLL-2003",
        "",
        "Entity-level precision/recall/F1 (seqeval, conlleval's rules) x100 on the real",
        "CoNLL-2003 (../shared/data/conll2003: 14,041 train, 3,250 dev, 3,453 test sentences),",
        "dev of the best epoch and test of that model. Written by `benchmarks/ner.py report`",
        "from the runs in `ner.jsonl`; the commands are in the script's docstring.",
        "",
        "| model | side | approach | lr | epochs | batch | dev P | dev R | dev F1 | test F1 "
        "| dev F1 per epoch | wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d, t = r["dev"], r["test"]
        per_epoch = " / ".join(f"{100 * f:.1f}" for f in r["history"])
        wall = f"{r['wall_s'] / 60:.0f} min ({r['threads']} threads)"
        if "extract_s" in r:
            wall += f" + {r['extract_s'] / 60:.0f} min features"
        lines.append(
            f"| {r['model']} | {r['side']} | {r['mode']} | {r['learning_rate']:g} "
            f"| {r['epochs']} | {r['batch_size']} | {100 * d['precision']:.1f} "
            f"| {100 * d['recall']:.1f} | {100 * d['f1']:.1f} | {100 * t['f1']:.1f} "
            f"| {per_epoch} | {wall} |"
        )
    if args.note:
        lines += ["", args.note]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(Path(args.out).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("finetune", "features"):
        p = sub.add_parser(name)
        p.add_argument("--model-dir", type=Path, default=None, help="default: all-MiniLM-L6-v2")
        p.add_argument("--model-name", default="all-MiniLM-L6-v2")
        p.add_argument("--conll-dir", type=Path, default=CONLL)
        p.add_argument("--max-train-sentences", type=int, default=None)
        p.add_argument("--max-eval-sentences", type=int, default=None, help="dev and test each")
        p.add_argument("--learning-rate", type=float, default=1e-4 if name == "finetune" else 1e-3)
        p.add_argument("--seed", type=int, default=42)
        p.add_argument("--epochs", type=int, default=3)
        p.add_argument("--batch-size", type=int, default=32)
        p.add_argument("--max-seq-length", type=int, default=128)
        p.add_argument("--threads", type=int, default=0)
        p.add_argument("--results", type=Path, required=True)
        if name == "finetune":
            p.add_argument("--side", choices=("ours", "hf"), default="ours")
            p.add_argument("--pack", action="store_true", help="pack a document's sentences")
        else:
            p.add_argument("--choices", nargs="+", default=list(LAYER_CHOICES))
            p.add_argument("--lstm-width", type=int, default=256)
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
    if args.command == "features":
        run_features(args)
        return
    record = run_hf(args) if args.side == "hf" else run_ours(args)
    print(json.dumps(record), flush=True)
    with args.results.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
