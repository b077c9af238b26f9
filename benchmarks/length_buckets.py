"""Pretraining step time with and without length buckets, on real examples, side by side.

Both arms are pretrain_model's own code under conf/budget: the data module, the module
(compiled where `compile: auto` compiles), the precision `auto` picks on this machine, clipping
at `gradient_clip_val` and AdamW. One arm takes batches of mixed lengths, padded to their
longest row; the other takes `length_buckets` batches, each from one band of lengths and padded
to its bound. Steps alternate between the arms (rotating order) from the same weights. The
steps an hour buys follow the mean step time over the bucket mix, so the report weighs each
bucket's median by its share of a whole epoch's batches, beside the plain arm's median.

    python benchmarks/length_buckets.py --data-dir <the data_dir of a pretrain_data run>
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from common import ROOT, ours_step, report_head, write_report

from bert_pipeline import settings
from bert_pipeline.io.example_shards_dataset import ExampleShardsDataset
from bert_pipeline.io.tokenizer_dataset import TokenizerDataset
from bert_pipeline.training.config import TrainingConfig
from bert_pipeline.training.hardware import keep_freed_memory
from bert_pipeline.training.trainer import (
    build_datamodule,
    build_model_config,
    build_module,
    example_table,
    with_machine_choice,
)

OUT = Path(__file__).with_suffix(".md")


def budget_config(args: argparse.Namespace, examples) -> TrainingConfig:
    """conf/budget's `pretrain_model`, completed by the examples' manifest, with this run's
    buckets and any setting the command line overrides."""
    loader = settings.CONFIG_LOADER_CLASS(
        conf_source=str(ROOT / "conf"),
        env="budget",
        runtime_params={"data_dir": str(args.data_dir)},
        **settings.CONFIG_LOADER_ARGS,
    )
    params = dict(loader["parameters"]["pretrain_model"])
    params["length_buckets"] = args.buckets
    for name in ("precision", "compile", "batch_size"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    return with_machine_choice(TrainingConfig.for_examples(params, examples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--buckets", type=int, nargs="+", default=[64, 96, 128])
    parser.add_argument("--steps", type=int, default=120, help="timed steps per arm")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--precision", help="instead of conf/budget's (auto)")
    parser.add_argument("--compile", choices=["auto", "true", "false"], help="instead of auto")
    parser.add_argument("--batch-size", type=int, help="instead of conf/budget's")
    parser.add_argument("--note", default="", help="free text written under the table")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()
    if args.compile in ("true", "false"):
        args.compile = args.compile == "true"
    torch.set_num_threads(args.threads)
    keep_freed_memory("cpu")

    examples = ExampleShardsDataset(
        path=str(args.data_dir / "05_model_input" / "pretraining_examples")
    ).load()
    tokenizer = TokenizerDataset(path=str(args.data_dir / "06_models" / "tokenizer")).load()
    bucketed_cfg = budget_config(args, examples)
    plain_cfg = dataclasses.replace(bucketed_cfg, length_buckets=None)
    bf16 = bucketed_cfg.precision == "bf16-mixed"
    table = example_table(examples)
    model_config = build_model_config(plain_cfg, tokenizer, int(table.lengths().max()))

    arms = {}
    for name, cfg in (("mixed lengths", plain_cfg), ("length buckets", bucketed_cfg)):
        torch.manual_seed(cfg.seed)  # the same initial weights in both arms
        datamodule = build_datamodule(table, tokenizer, cfg)
        model = build_module(cfg, model_config, datamodule).model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        loader = datamodule.train_dataloader()
        arms[name] = (model, opt, iter(loader), loader.batch_sampler)
    sampler = arms["length buckets"][3]
    shares = Counter(width for _, width in sampler.epoch_batches(0))  # widths: the cut bounds
    if len(sampler) < args.steps + 20 * len(shares):
        sys.exit(f"{len(sampler)} batches per epoch: too few for --steps {args.steps}")

    load_before = os.getloadavg()[0]
    for _ in range(3):  # compile the mixed-length arm's graph untimed
        model, opt, batches, _ = arms["mixed lengths"]
        ours_step(model, opt, next(batches), bf16=bf16, clip=plain_cfg.gradient_clip_val)
    model, opt, batches, _ = arms["length buckets"]
    unseen = set(shares)  # and each bucket's graph
    while unseen:
        batch = next(batches)
        unseen.discard(batch["input_ids"].shape[1])
        ours_step(model, opt, batch, bf16=bf16, clip=plain_cfg.gradient_clip_val)
    times: dict[str, list[tuple[int, int, float]]] = {name: [] for name in arms}
    names = list(arms)
    for i in range(args.steps):
        for name in names[i % 2 :] + names[: i % 2]:
            model, opt, batches, _ = arms[name]
            batch = next(batches)
            start = time.perf_counter()
            ours_step(model, opt, batch, bf16=bf16, clip=plain_cfg.gradient_clip_val)
            seconds = time.perf_counter() - start
            width, tokens = batch["input_ids"].shape[1], int(batch["attention_mask"].sum())
            times[name].append((width, tokens, seconds))
        print(f"step {i}: " + ", ".join(f"{n} {times[n][-1]}" for n in names), file=sys.stderr)
    load_after = os.getloadavg()[0]

    def median_ms(rows) -> float:
        return 1000 * statistics.median(s for _, _, s in rows)

    def tokens_per_s(rows) -> float:
        return sum(t for _, t, _ in rows) / sum(s for _, _, s in rows)

    plain_ms = median_ms(times["mixed lengths"])
    by_width = {w: [r for r in times["length buckets"] if r[0] == w] for w in sorted(shares)}
    untimed = [w for w, rows in by_width.items() if not rows]
    if untimed:
        sys.exit(f"no timed batch of bucket(s) {untimed}: raise --steps")
    total = sum(shares.values())
    bucket_ms = sum(shares[w] / total * median_ms(rows) for w, rows in by_width.items())
    title = "Length buckets against mixed-length batches"
    load = (load_before, load_after)
    lines = [
        *report_head(title, "benchmarks/length_buckets.py", args.threads, load),
        f"- torch {torch.__version__}, Python {platform.python_version()}; conf/budget's step: "
        f"precision {bucketed_cfg.precision}, compile {bucketed_cfg.compile}, dropout "
        f"{bucketed_cfg.dropout}, batch {bucketed_cfg.batch_size}, model "
        f"{model_config.num_hidden_layers} x {model_config.hidden_size}, vocab "
        f"{model_config.vocab_size}",
        f"- {len(table):,} examples of {args.data_dir}; {args.steps} batches of epoch 0 of each "
        f"arm (seed {bucketed_cfg.seed}), after untimed steps that compile every shape; "
        "interleaved",
        "",
        "| arm | batches | median ms/step | real tokens/s |",
        "|---|---:|---:|---:|",
        f"| mixed lengths | {args.steps} | {plain_ms:.0f} | "
        f"{tokens_per_s(times['mixed lengths']):,.0f} |",
    ]
    for width, rows in by_width.items():
        share = shares[width] / total
        lines.append(
            f"| bucket {width} ({share:.0%} of an epoch's batches) | {len(rows)} | "
            f"{median_ms(rows):.0f} | {tokens_per_s(rows):,.0f} |"
        )
    lines += [
        "",
        f"Length buckets, weighted by an epoch's shares: {bucket_ms:.0f} ms per step, "
        f"**{plain_ms / bucket_ms:.2f}x** the steps per hour of mixed lengths "
        f"({plain_ms:.0f} ms).",
    ]
    write_report(lines, args.note, args.output)


if __name__ == "__main__":
    main()
