"""Which pretraining recipe learns fastest on this CPU: held-out MLM accuracy at equal wall time.

Frozen experiment: kept as the record of how pretraining_recipe.md was measured, not maintained
against the current code (its imports resolve; its numbers are not re-checked) and
imported by no tool.

Each named recipe (model shape, vocabulary, learning rate, batch, dropout) trains our
`BertForPreTraining` on examples of the first `--megabytes` of ../shared's Wikipedia for
`--minutes` of training time (its step count set from a timed probe, so the linear decay ends at
the budget), with the data, held-out articles, optimizer, schedule shape and evaluation of
benchmarks/experiments/pretraining_curve.py. Vocabularies: bert-base-uncased's (30522) or a
WordPiece vocabulary of the given size trained on the same sentences (`train_tokenizer`). Short
budgets favour small, fast models, so the ranking is a guide for the budget configuration, not a
proof: conf/budget's choice is then checked at full length by
benchmarks/experiments/pretraining_value.py.

    python benchmarks/experiments/pretraining_recipe.py --minutes 6 --threads 1 \\
        --results /tmp/pretraining_recipe.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/common.py
from common import cpu_name  # noqa: E402
from pretraining_curve import WIKI, Run, build_examples, train, vocab_file  # noqa: E402

OUT = Path(__file__).with_suffix(".md")

# name: (layers, hidden, heads, vocab (0: bert-base-uncased's), lr, batch, dropout)
RECIPES: dict[str, tuple[int, int, int, int, float, int, float]] = {
    "tiny, bert-base vocab, lr 1e-3, b32 (make pretrain's)": (2, 128, 2, 0, 1e-3, 32, 0.1),
    "tiny, 16k vocab": (2, 128, 2, 16000, 1e-3, 32, 0.1),
    "tiny, 8k vocab": (2, 128, 2, 8000, 1e-3, 32, 0.1),
    "tiny, 16k vocab, lr 3e-3": (2, 128, 2, 16000, 3e-3, 32, 0.1),
    "tiny, 16k vocab, b128 lr 3e-3": (2, 128, 2, 16000, 3e-3, 128, 0.1),
    "tiny, 16k vocab, no dropout": (2, 128, 2, 16000, 1e-3, 32, 0.0),
    "4 layers x 128, 16k vocab": (4, 128, 2, 16000, 1e-3, 32, 0.1),
}


def model_for(recipe: tuple, vocab_size: int, seed: int) -> torch.nn.Module:
    from bert_pipeline.model import BertConfig, BertForPreTraining

    layers, hidden, heads, _, _, _, dropout = recipe
    config = BertConfig(
        vocab_size=vocab_size,
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    torch.manual_seed(seed)
    return BertForPreTraining(config)


def run_recipe(name: str, recipe: tuple, data: dict, args: argparse.Namespace) -> dict:
    from bert_pipeline.data.collator import PretrainingCollator
    from bert_pipeline.training.data import ExampleTable, split_indices

    table, facts = data
    table = ExampleTable(table)
    train_idx, eval_idx = split_indices(table, args.eval_examples, args.seed)
    collate = PretrainingCollator(pad_token_id=facts["pad_id"], pad_to_multiple_of=8)
    eval_batches = [
        collate([table.row(int(i)) for i in eval_idx[k : k + 64]])
        for k in range(0, len(eval_idx), 64)
    ]
    lr, batch = recipe[4], recipe[5]
    opts = SimpleNamespace(
        batch_size=batch, weight_decay=0.01, seed=args.seed, loads=[], warmup=1, steps=1
    )
    probe = Run(name, model_for(recipe, facts["vocab_size"], args.seed), False, opts, lr)
    opts.log_every = opts.eval_every = 10**9
    train([probe], train_idx, eval_batches[:1], table, collate, opts, args.probe_steps, "probe")
    per_step = probe.train_s / args.probe_steps
    steps = max(10, int(args.minutes * 60 / per_step))
    opts.steps, opts.warmup = steps, round(0.1 * steps)
    opts.log_every, opts.eval_every = max(1, steps // 20), max(1, steps // 8)
    run = Run(name, model_for(recipe, facts["vocab_size"], args.seed), False, opts, lr)
    train([run], train_idx, eval_batches, table, collate, opts, steps, name)
    tokens = sum(int(table.row(int(i))["input_ids"].size) for i in train_idx[:2000]) / 2000
    return {
        "name": name,
        "recipe": recipe,
        "steps": steps,
        "train_s": run.train_s,
        "tokens_per_s": tokens * batch * steps / run.train_s,
        "eval_log": run.eval_log,
        "train_log": run.train_log,
        "data": facts,
        "loads": opts.loads,
    }


def report(res: dict, note: str = "") -> str:
    lines = [
        "# Pretraining recipes at equal training time "
        "(benchmarks/experiments/pretraining_recipe.py)",
        "",
        f"Measured {res['finished']} UTC with `{res['command']}`; {res['cpu']}, "
        f"{res['cores']} cores, torch threads {res['threads']}, torch {res['torch']}. "
        f"1-min load average at the evaluations {min(res['loads']):.1f} to "
        f"{max(res['loads']):.1f} ({res['threads']} = this script alone).",
        "",
        f"Data: first {res['megabytes']:g} MB of ../shared Wikipedia, `create_examples` "
        "(max_seq_length 128, dupe_factor 1, static masks, 20 predictions at most), "
        f"{res['eval_examples']} held-out examples of whole articles; each recipe trains "
        f"{res['minutes']:g} minutes (steps from a {res['probe_steps']}-step probe), AdamW "
        "weight decay 0.01, linear warmup over 10% then decay to 0, clipping 1.0, MLM + NSP.",
        "",
        "| recipe | vocab | examples | steps | training min | tokens/s | held-out MLM acc at 1/2 "
        "| at 3/4 | at end | MLM loss at end | NSP acc at end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res["recipes"]:
        log = r["eval_log"]

        def at(frac: float, log=log, r=r) -> float:
            """Held-out accuracy interpolated at a fraction of the training time."""
            t = [e["train_s"] for e in log]
            return float(np.interp(frac * r["train_s"], t, [e["mlm_accuracy"] for e in log]))

        lines.append(
            f"| {r['name']} | {r['data']['vocab_size']} | {r['data']['examples']:,} | "
            f"{r['steps']} | {r['train_s'] / 60:.1f} | {r['tokens_per_s']:,.0f} | "
            f"{at(0.5):.3f} | {at(0.75):.3f} | "
            f"{log[-1]['mlm_accuracy']:.3f} | {log[-1]['mlm_loss']:.2f} | "
            f"{log[-1]['nsp_accuracy']:.3f} |"
        )
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=6.0)
    parser.add_argument("--megabytes", type=float, default=20.0)
    parser.add_argument("--eval-examples", type=int, default=1000)
    parser.add_argument("--probe-steps", type=int, default=10)
    parser.add_argument("--only", nargs="*", default=None, help="recipe names (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--wiki", type=Path, default=WIKI)
    parser.add_argument("--results", type=Path, default=Path("/tmp/pretraining_recipe.json"))
    parser.add_argument("--report", action="store_true", help="only rewrite --output")
    parser.add_argument("--output", type=Path, default=OUT)
    parser.add_argument("--note", default="", help="conclusion written under the table")
    args = parser.parse_args()
    if not args.report:
        torch.set_num_threads(args.threads)
        names = args.only or list(RECIPES)
        unknown = sorted(set(names) - set(RECIPES))
        if unknown:
            sys.exit(f"unknown recipe(s) {unknown}; known: {list(RECIPES)}")
        previous = json.loads(args.results.read_text()) if args.results.exists() else None
        done = {r["name"]: r for r in previous["recipes"]} if previous else {}
        data: dict[int, tuple] = {}
        for name in names:
            vocab = RECIPES[name][3]
            if vocab not in data:
                opts = SimpleNamespace(
                    wiki=args.wiki,
                    megabytes=args.megabytes,
                    vocab_file=vocab_file(),
                    train_vocab=vocab,
                    max_seq_length=128,
                    seed=args.seed,
                )
                data[vocab] = build_examples(opts)
                print(f"data, vocab {vocab}: {data[vocab][1]}", file=sys.stderr, flush=True)
            done[name] = run_recipe(name, RECIPES[name], data[vocab], args)
        res = {
            "command": shlex.join(
                ["python", "benchmarks/experiments/pretraining_recipe.py", *sys.argv[1:]]
            ),
            "finished": f"{datetime.now(UTC):%Y-%m-%d %H:%M}",
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "threads": args.threads,
            "torch": torch.__version__,
            "megabytes": args.megabytes,
            "minutes": args.minutes,
            "eval_examples": args.eval_examples,
            "probe_steps": args.probe_steps,
            "recipes": [done[n] for n in RECIPES if n in done],
            "loads": [x for r in done.values() for x in r["loads"]],
        }
        args.results.write_text(json.dumps(res, indent=1), encoding="utf-8")
    res = json.loads(args.results.read_text())
    args.output.write_text(report(res, args.note), encoding="utf-8")
    print(args.output.read_text())


if __name__ == "__main__":
    main()
