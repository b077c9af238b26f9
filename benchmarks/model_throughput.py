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
import shlex
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch
import transformers

from bert_pipeline.model import BertConfig, BertForPreTraining

OUT = Path(__file__).with_suffix(".md")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def command_line(script: str) -> str:
    """This run's command for the report; --note is left out (it is printed under the table)."""
    argv = sys.argv[1:]
    if "--note" in argv:
        i = argv.index("--note")
        argv = argv[:i] + argv[i + 2 :]
    return shlex.join(["python", script, *argv])


def write_report(lines: list[str], note: str, output: Path) -> None:
    """The table and the note under it, to `output` and the terminal."""
    text = "\n".join([*lines, *(["", note] if note else [])]) + "\n"
    output.write_text(text, encoding="utf-8")
    print(text, end="")


def add_batch_arguments(parser: argparse.ArgumentParser, batch_size: int, vocab_size: int) -> None:
    """The options `make_batch` reads, with a script's own default batch and vocabulary size."""
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=vocab_size)
    parser.add_argument("--mask-prob", type=float, default=0.15)
    parser.add_argument("--max-predictions", type=int, default=20)


def make_batch(gen: torch.Generator, args: argparse.Namespace, vocab_size: int) -> dict:
    """Padded [CLS] A [SEP] B [SEP] batch; 10% of rows shorter (as google's short_seq_prob)."""
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
        k = min(P, max(1, round(n * args.mask_prob)))
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


def ours_step(model, opt, b, *, bf16: bool = False, clip: float | None = None) -> float:
    """One step of our model; `bf16` under CPU autocast, `clip` the gradient norm first."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(
            b["input_ids"],
            b["token_type_ids"],
            b["attention_mask"],
            b["masked_lm_positions"],
            b["masked_lm_labels"],
            b["next_sentence_label"],
        ).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.item()


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
