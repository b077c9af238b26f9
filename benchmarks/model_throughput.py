"""Training throughput of our BertForPreTraining vs transformers' (SDPA attention), on CPU.

Both models start from the same weights and see the same batches with the same masked
positions; HF computes MLM logits on every position (labels -100 elsewhere), which is what
it does, ours only on the masked ones. A step is forward + backward + AdamW. Throughput is
non-pad tokens per second; we report the median over the timed steps, which run
interleaved (ours, HF, HF, ours, ...) so that load from other processes hits both alike.

    python benchmarks/model_throughput.py --presets mini small --steps 20 --warmup 3

transformers is a bench/test extra: this script is not part of the package.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch
import transformers
from common import add_batch_arguments, command_line, cpu_name, make_batch, ours_step, write_report

from bert_pipeline.model import BertConfig, BertForPreTraining

OUT = Path(__file__).with_suffix(".md")


def hf_step(model, opt, b) -> float:
    loss = model(
        input_ids=b["input_ids"],
        token_type_ids=b["token_type_ids"],
        attention_mask=b["attention_mask"],
        labels=b["hf_labels"],
        next_sentence_label=b["next_sentence_label"],
    ).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


def bench_preset(preset: str, args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    config = BertConfig.from_preset(preset, vocab_size=args.vocab_size)
    ours = BertForPreTraining(config)
    hf = transformers.BertForPreTraining(
        transformers.BertConfig(**config.to_dict(), attn_implementation="sdpa")
    )
    hf.load_state_dict(ours.state_dict())
    ours.train()
    hf.train()
    fused = {"fused": True} if args.optimizer == "fused" else {"foreach": True}
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-4, **fused)
    opt_hf = torch.optim.AdamW(hf.parameters(), lr=1e-4, **fused)
    gen = torch.Generator().manual_seed(args.seed)
    times: dict[str, list[float]] = {"ours": [], "hf": []}
    tokens: list[int] = []
    runners = {"ours": (ours_step, ours, opt_ours), "hf": (hf_step, hf, opt_hf)}
    for step in range(args.warmup + args.steps):
        batch = make_batch(gen, args, config.vocab_size)
        order = ["ours", "hf"] if step % 2 == 0 else ["hf", "ours"]
        for name in order:
            fn, model, opt = runners[name]
            start = time.perf_counter()
            fn(model, opt, batch)
            elapsed = time.perf_counter() - start
            if step >= args.warmup:
                times[name].append(elapsed)
        if step >= args.warmup:
            tokens.append(int(batch["attention_mask"].sum()))
        if step >= args.warmup:
            print(
                f"{preset} step {step}: ours {times['ours'][-1]:.3f}s, hf {times['hf'][-1]:.3f}s",
                file=sys.stderr,
            )
    result = {"preset": preset}
    for name in ("ours", "hf"):
        tps = [n / t for n, t in zip(tokens, times[name], strict=True)]
        result[name] = statistics.median(tps)
        result[name + "_ms"] = 1000 * statistics.median(times[name])
    result["ratio"] = result["ours"] / result["hf"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["mini", "small"])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=3)
    add_batch_arguments(parser, batch_size=32, vocab_size=30522)
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[torch.get_num_threads()],
        help="torch thread counts to measure, one table row each (default: torch's)",
    )
    parser.add_argument(
        "--optimizer",
        choices=["fused", "foreach"],
        default="fused",
        help="AdamW implementation for both models (fused is several times faster on CPU)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--note", default="", help="free text written under the table")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    results = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        results += [{"threads": threads, **bench_preset(p, args)} for p in args.presets]
    load_after = os.getloadavg()[0]
    command = command_line("benchmarks/model_throughput.py")
    lines = [
        "# Pre-training throughput: bert_pipeline vs transformers",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{command}`.",
        "",
        f"- CPU: {cpu_name()}, {os.cpu_count()} logical cores; "
        f"1-min load average {load_before:.1f} before, "
        f"{load_after:.1f} after (other processes share the machine when this is above ~0)",
        f"- torch {torch.__version__}, transformers {transformers.__version__}"
        f' (`attn_implementation="sdpa"`), Python {platform.python_version()}',
        f"- batch {args.batch_size} x seq {args.seq_length}, vocab {args.vocab_size}, "
        f"{args.mask_prob:.0%} masking capped at {args.max_predictions}, 10% shorter rows; "
        f"fwd + bwd + AdamW ({args.optimizer}), fp32",
        f"- {args.warmup} warm-up + {args.steps} timed steps per model, interleaved; "
        "medians over timed steps; tokens = non-pad tokens; threads = torch.set_num_threads",
        "",
        "| preset | threads | ours tokens/s | HF tokens/s | ours ms/step | HF ms/step | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['preset']} | {r['threads']} | {r['ours']:,.0f} | {r['hf']:,.0f} | "
            f"{r['ours_ms']:.0f} | {r['hf_ms']:.0f} | {r['ratio']:.2f}x |"
        )
    write_report(lines, args.note, args.output)


if __name__ == "__main__":
    main()
