"""Pretraining step time of our BERT under the training settings the pipeline offers, on CPU.

Each variant is what `pretrain_model` runs for that setting: `precision` 32 (fused AdamW) or
bf16-mixed (torch.autocast; foreach AdamW, as Lightning refuses clipping with a fused one),
`compile` (torch.compile of the model), `dropout` (0.1 or 0.0 while pretraining); "SDPA" is
the compiled step with torch's attention kernel instead of the explicit form the model takes
when compiled on a CPU. Like pretrain_model, the process keeps freed memory for the next step
(`keep_freed_memory`); `--malloc glibc` leaves glibc's defaults, to time that apart. A step is
forward + backward + clipping at norm 1.0 + AdamW. "logits kept" is the step with the
masked-LM loss taken from the [N, vocab] logits, as every step was before
`linear_cross_entropy` (CPU training steps now skip them). All variants start
from the same weights, see the same batches and run interleaved (rotating order), so that load
from other processes hits them alike; we report the median over the timed steps.

    python benchmarks/training_speed.py --preset tiny --vocab-size 16000 --batch-size 64

bf16 matmuls use the CPU's AMX or AVX512-BF16 units where it has them (lscpu: amx_bf16).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from common import add_batch_arguments, make_batch, ours_step, report_head, write_report

from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.model.bert import BertSelfAttention
from bert_pipeline.training.hardware import keep_freed_memory

OUT = Path(__file__).with_suffix(".md")

# name: (bf16-mixed, compile, dropout while pretraining, masked-LM logits kept, SDPA when
# compiled). Like pretrain_model, every variant but "logits kept" asks for no logits.
VARIANTS = {
    "fp32": (False, False, 0.1, False, False),
    "fp32, logits kept": (False, False, 0.1, True, False),
    "fp32, dropout 0": (False, False, 0.0, False, False),
    "fp32, dropout 0, logits kept": (False, False, 0.0, True, False),
    "bf16": (True, False, 0.1, False, False),
    "bf16+compile": (True, True, 0.1, False, False),
    "bf16+compile, dropout 0": (True, True, 0.0, False, False),
    "bf16+compile, dropout 0, logits kept": (True, True, 0.0, True, False),
    "bf16+compile, dropout 0, SDPA": (True, True, 0.0, False, True),
}


def build(name: str, args: argparse.Namespace, state: dict) -> tuple:
    bf16, compile_, dropout, logits, sdpa = VARIANTS[name]
    config = BertConfig.from_preset(
        args.preset,
        vocab_size=args.vocab_size,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    model = BertForPreTraining(config)
    model.load_state_dict(state)
    model.train()
    for module in model.modules():
        if sdpa and isinstance(module, BertSelfAttention):
            module.explicit_when_compiled_on_cpu = False
    if compile_:
        model.compile()
    opt = torch.optim.AdamW(
        model.parameters(), lr=1e-4, **({"foreach": True} if bf16 else {"fused": True})
    )
    return model, opt, bf16, logits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation)")
    add_batch_arguments(parser, batch_size=64, vocab_size=16000)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=list(VARIANTS),
        help="the settings to time (fp32, the speed-up's base, always runs)",
    )
    parser.add_argument(
        "--malloc",
        choices=["kept", "glibc"],
        default="kept",
        help="kept: freed memory stays with the process, as in pretrain_model; glibc: the defaults",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--note", default="", help="free text written under the table")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    kept = args.malloc == "kept" and keep_freed_memory("cpu")

    load_before = os.getloadavg()[0]
    state = BertForPreTraining(BertConfig.from_preset(args.preset, vocab_size=args.vocab_size))
    state = state.state_dict()
    names = [name for name in VARIANTS if name == "fp32" or name in args.variants]
    runners = {name: build(name, args, state) for name in names}
    gen = torch.Generator().manual_seed(args.seed)
    times: dict[str, list[float]] = {name: [] for name in names}
    tokens: list[int] = []
    for i in range(args.warmup + args.steps):
        batch = make_batch(gen, args, args.vocab_size)
        for name in names[i % len(names) :] + names[: i % len(names)]:
            model, opt, bf16, logits = runners[name]
            start = time.perf_counter()
            ours_step(model, opt, batch, bf16=bf16, clip=1.0, logits=logits)
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)
        if i >= args.warmup:
            tokens.append(int(batch["attention_mask"].sum()))
            print(
                f"step {i}: " + ", ".join(f"{n} {times[n][-1]:.3f}s" for n in names),
                file=sys.stderr,
            )
    load_after = os.getloadavg()[0]

    base = statistics.median(times["fp32"])
    title = "Pretraining step time by training setting"
    load = (load_before, load_after)
    lines = [
        *report_head(title, "benchmarks/training_speed.py", args.threads, load),
        f"- torch {torch.__version__}, Python {platform.python_version()}; freed memory "
        + ("kept by the process (`keep_freed_memory`)" if kept else "returned (glibc's defaults)"),
        f"- preset {args.preset}, batch {args.batch_size} x seq {args.seq_length}, vocab "
        f"{args.vocab_size}, {args.mask_prob:.0%} masking capped at {args.max_predictions}, "
        "10% shorter rows; MLM + NSP loss; fwd + bwd + clipping + AdamW",
        f"- {args.warmup} warm-up + {args.steps} timed steps per variant, interleaved; "
        "medians over timed steps; tokens = non-pad tokens",
        "",
        "| variant | ms/step | tokens/s | speed-up over fp32 |",
        "|---|---:|---:|---:|",
    ]
    for name in names:
        ms = statistics.median(times[name])
        tps = statistics.median(n / t for n, t in zip(tokens, times[name], strict=True))
        lines.append(f"| {name} | {1000 * ms:.0f} | {tps:,.0f} | {base / ms:.2f}x |")
    write_report(lines, args.note, args.output)


if __name__ == "__main__":
    main()
