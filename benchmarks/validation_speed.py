"""Time of one validation pass of pretraining, eager against compiled, on CPU.

`pretrain_model` validates eagerly even when it trains compiled. This measures why: the
compiled pass is faster, but its first call compiles the evaluation graphs (split at the
data-dependent selection of masked rows, again for a short last batch), and a run validates
only about 20 times. The pass is the budget recipe's: the tiny preset with bf16 autocast where
`precision: auto` picks it, 2,000 held-out examples in batches of 64, no gradients. The
compile starts from an empty inductor cache, as a user's first run does, unless
TORCHINDUCTOR_CACHE_DIR names one (a later run's).

    python benchmarks/validation_speed.py --examples 2000 --batch-size 64 --vocab-size 16000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import torch
from common import add_batch_arguments, command_line, cpu_name, make_batch, write_report

from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.training.hardware import bf16_units, choose

OUT = Path(__file__).with_suffix(".md")


def one_pass(model: torch.nn.Module, batches: list[dict], bf16: bool) -> float:
    start = time.perf_counter()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for batch in batches:
            model(**batch)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--examples", type=int, default=2000, help="held-out examples per pass")
    add_batch_arguments(parser, batch_size=64, vocab_size=16000)
    parser.add_argument("--passes", type=int, default=5, help="timed passes per variant")
    parser.add_argument(
        "--variants", nargs="+", choices=["eager", "compiled"], default=["eager", "compiled"]
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--note", default="", help="free text written under the table")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()
    cold = "TORCHINDUCTOR_CACHE_DIR" not in os.environ  # else: the cache a user's later run has
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
    torch.manual_seed(args.seed)
    bf16 = choose("auto", "auto", "cpu").precision == "bf16-mixed"

    gen = torch.Generator().manual_seed(args.seed)
    sizes = [args.batch_size] * (args.examples // args.batch_size)
    sizes += [args.examples % args.batch_size] if args.examples % args.batch_size else []
    batches = []
    for size in sizes:
        batch = make_batch(
            gen, argparse.Namespace(**{**vars(args), "batch_size": size}), args.vocab_size
        )
        batches.append({k: v for k, v in batch.items() if k != "hf_labels"})
    config = BertConfig.from_preset(args.preset, vocab_size=args.vocab_size)
    model = BertForPreTraining(config).eval()

    load_before = os.getloadavg()[0]
    rows = []
    if "eager" in args.variants:
        times = [one_pass(model, batches, bf16) for _ in range(args.passes)]
        rows.append(("eager", None, statistics.median(times)))
    if "compiled" in args.variants:
        model.compile()
        first = one_pass(model, batches, bf16)
        times = [one_pass(model, batches, bf16) for _ in range(args.passes)]
        rows.append(("compiled", first, statistics.median(times)))
    print("; ".join(f"{name} {t:.2f}s" for name, _, t in rows), file=sys.stderr)
    load_after = os.getloadavg()[0]

    lines = [
        "# One validation pass of pretraining, eager and compiled (benchmarks/validation_speed.py)",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with "
        f"`{command_line('benchmarks/validation_speed.py')}`.",
        "",
        f"- CPU: {cpu_name()}, {os.cpu_count()} logical cores, torch threads "
        f"{torch.get_num_threads()}; 1-min load average {load_before:.1f} before, "
        f"{load_after:.1f} after",
        f"- torch {torch.__version__}; "
        + (f"bf16 autocast ({bf16_units('cpu')})" if bf16 else "fp32 (no bf16 units)"),
        f"- preset {args.preset}, {args.examples} examples in batches of {args.batch_size} x seq "
        f"{args.seq_length}, vocab {args.vocab_size}; no gradients; median of {args.passes} "
        "passes; the first compiled pass starts from "
        + ("an empty inductor cache" if cold else "TORCHINDUCTOR_CACHE_DIR's cache"),
        "",
        "| variant | first pass (s) | pass (s) |",
        "|---|---:|---:|",
    ]
    for name, first, median in rows:
        lines.append(f"| {name} | {'' if first is None else f'{first:.1f}'} | {median:.2f} |")
    write_report(lines, args.note, args.output)


if __name__ == "__main__":
    main()
