"""Reference GLUE fine-tuning with transformers' BertForSequenceClassification + Trainer.

The yardstick for our own fine-tuning (benchmarks/glue_parity.py runs both): the same
hyperparameters as bert_pipeline.glue.finetune (AdamW betas 0.9/0.999 eps 1e-6, weight decay
except on biases and LayerNorm, int(warmup_proportion * steps) linear warmup then linear decay
to 0, grad-norm clip, dynamic padding, fp32 on CPU) but HF's tokenizer, model, training loop
and sklearn/scipy metrics. Only the TSV reading and the seeded train subsample are shared, so
both sides see the same examples. Needs the bench extra (transformers, accelerate).

    python benchmarks/hf_glue_reference.py --task rte --model-dir <folder> \\
        --max-train-examples 1000 --epochs 3 --learning-rate 1e-4 --seed 42
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from common import DEFAULT_GLUE, RECIPE, Encoded, load_tables, training_arguments
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from bert_pipeline.glue.tasks import GlueTask


def sklearn_metrics(task: GlueTask, preds: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The task's official metrics, computed independently of bert_pipeline.glue.metrics."""
    out = {}
    for name in task.metrics:
        if name == "accuracy":
            out[name] = float(accuracy_score(labels, preds))
        elif name == "f1":
            out[name] = float(f1_score(labels, preds))
        elif name == "matthews_corr":
            out[name] = float(matthews_corrcoef(labels, preds))
        elif name == "pearson":
            out[name] = float(pearsonr(preds, labels)[0])
        elif name == "spearman":
            out[name] = float(spearmanr(preds, labels)[0])
        else:
            raise ValueError(f"unknown GLUE metric {name!r}")
    return out


def run_reference(
    task: GlueTask,
    train: pd.DataFrame,
    dev: pd.DataFrame,
    model_dir: Path,
    *,
    learning_rate: float,
    seed: int,
    epochs: int,
    batch_size: int = 32,
    eval_batch_size: int = 128,
    warmup_proportion: float = RECIPE.warmup_proportion,
    weight_decay: float = RECIPE.weight_decay,
    max_seq_length: int = RECIPE.max_seq_length,
    gradient_clip_val: float = RECIPE.gradient_clip_val,
    progress_bar: bool = False,
) -> dict:
    """Fine-tunes once; returns per-epoch dev metrics and the wall time (load to last eval)."""
    from transformers import (
        AutoTokenizer,
        BertForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        set_seed,
    )

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)

    def encode(frame: pd.DataFrame) -> Encoded:
        texts = [frame["text_a"].tolist()]
        if task.is_pair:
            texts.append(frame["text_b"].tolist())
        enc = tokenizer(*texts, truncation="longest_first", max_length=max_seq_length)
        cast = float if task.is_regression else int
        return Encoded(dict(enc), [cast(v) for v in frame["label"]])

    train_set, dev_set = encode(train), encode(dev)
    set_seed(seed)  # the new head's init, as our side seeds before building the classifier
    model = BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=task.num_labels, dtype=torch.float32
    )
    steps = math.ceil(len(train_set) / batch_size) * epochs

    def compute_metrics(prediction) -> dict[str, float]:
        logits = prediction.predictions
        preds = logits.squeeze(-1) if task.is_regression else logits.argmax(-1)
        return sklearn_metrics(task, preds, prediction.label_ids)

    with tempfile.TemporaryDirectory() as out_dir:
        args = training_arguments(
            out_dir,
            learning_rate=learning_rate,
            batch_size=batch_size,
            epochs=epochs,
            total_steps=steps,
            seed=seed,
            weight_decay=weight_decay,
            warmup_proportion=warmup_proportion,
            gradient_clip_val=gradient_clip_val,
            per_device_eval_batch_size=eval_batch_size,
            eval_strategy="epoch",
            logging_strategy="epoch",
            dataloader_num_workers=0,
            disable_tqdm=not progress_bar,
        )
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=train_set,
            eval_dataset=dev_set,
            data_collator=DataCollatorWithPadding(tokenizer),
            compute_metrics=compute_metrics,
        )
        trainer.train()
    wall = time.perf_counter() - start
    history = [
        {"epoch": round(e["epoch"]) - 1, "metrics": {m: e[f"eval_{m}"] for m in task.metrics}}
        for e in trainer.state.log_history
        if "eval_loss" in e
    ]
    return {"steps": trainer.state.global_step, "history": history, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--glue-dir", type=Path, default=DEFAULT_GLUE)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--out", type=Path, help="append the result as one JSON line")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    task, train, dev = load_tables(
        args.glue_dir, args.task, args.max_train_examples, args.sample_seed
    )
    result = run_reference(
        task,
        train,
        dev,
        args.model_dir,
        learning_rate=args.learning_rate,
        seed=args.seed,
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
    )
    record = {
        "side": "hf",
        "task": task.name,
        "seed": args.seed,
        "learning_rate": args.learning_rate,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "train_examples": len(train),
        "dev_examples": len(dev),
        "threads": torch.get_num_threads(),
        **result,
    }
    print(json.dumps(record), flush=True)
    if args.out:
        with args.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
