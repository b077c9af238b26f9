"""End-to-end Lightning pretraining throughput (real tokens/s) on synthetic examples.

Runs the same `run_training` the pipeline uses (data module, collator, AdamW, schedule, clipping,
validation and checkpoint callbacks) on random token sequences of a fixed length, so the number
measures the training stack, not the data pipeline. Prints one markdown table row per preset.

    python benchmarks/train_throughput.py --presets tiny mini --batch-size 32 --steps 30
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from bert_pipeline.data.tokenizer import SPECIAL_TOKENS, tokenizer_from_vocab
from bert_pipeline.training.config import TrainingConfig
from bert_pipeline.training.trainer import run_training


def synthetic(vocab_size: int, n: int, seq_len: int, seed: int = 0):
    """A tokenizer with `vocab_size` entries and `n` dynamic-mode examples of `seq_len` tokens."""
    tmp = Path(tempfile.mkdtemp(prefix="train_bench_"))
    words = [f"w{i}" for i in range(vocab_size - len(SPECIAL_TOKENS))]
    (tmp / "vocab.txt").write_text("\n".join(SPECIAL_TOKENS + words) + "\n", encoding="utf-8")
    tokenizer = tokenizer_from_vocab(tmp / "vocab.txt")
    rng = np.random.default_rng(seed)
    half = (seq_len - 3) // 2
    rows = []
    for i in range(n):
        a = rng.integers(5, vocab_size, half)
        b = rng.integers(5, vocab_size, seq_len - 3 - half)
        ids = np.concatenate([[2], a, [3], b, [3]]).astype(np.int32)
        rows.append(
            {
                "example_id": i,
                "input_ids": ids,
                "token_type_ids": np.r_[np.zeros(half + 2), np.ones(len(b) + 1)].astype(np.int8),
                "masked_lm_positions": np.zeros(0, np.int32),
                "masked_lm_ids": np.zeros(0, np.int32),
                "next_sentence_label": np.int8(i % 2),
                "a_doc_id": f"d{i // 8}",
            }
        )
    return tokenizer, pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["tiny", "mini"])
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--precision", default="32")
    parser.add_argument("--accelerator", default="auto")
    args = parser.parse_args()

    n = args.batch_size * (args.steps + 5) + 64
    tokenizer, examples = synthetic(args.vocab_size, n, args.seq_len)
    print(f"torch {torch.__version__}, {platform.machine()}, threads {torch.get_num_threads()}, "
          f"cuda {torch.cuda.is_available()}")  # fmt: skip
    print("| preset | batch | seq len | steps | precision | wall s | tokens/s |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for preset in args.presets:
        with tempfile.TemporaryDirectory() as ckpt:
            cfg = TrainingConfig(
                model_preset=preset, batch_size=args.batch_size, max_steps=args.steps,
                warmup_steps=min(5, args.steps), val_split=64, val_every_n_steps=10**6,
                log_every_n_steps=max(1, args.steps // 3), checkpoint_every_n_steps=10**6,
                checkpoint_dir=ckpt, progress_bar=False, precision=args.precision,
                accelerator=args.accelerator, deterministic=False,
            )  # fmt: skip
            start = time.perf_counter()
            result = run_training(examples, tokenizer, cfg)
            wall = time.perf_counter() - start
        tps = result.metrics.get("train/mean_tokens_per_sec", float("nan"))
        print(f"| {preset} | {args.batch_size} | {args.seq_len} | {args.steps} | "
              f"{args.precision} | {wall:.1f} | {tps:,.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
