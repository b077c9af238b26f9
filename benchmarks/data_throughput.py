"""Throughput of the pretraining data part on real corpora (WikiText-2 valid + Gutenberg books).

Measures each stage of the `pretrain_data` pipeline as plain function calls (no Kedro/MLflow
overhead): ingest + sentence splitting (documents/s), WordPiece training, batch tokenization,
and example creation with num_proc 1 vs 2 (examples/s, best of --repeats). Writes a markdown
table to benchmarks/data_throughput.md.

    python benchmarks/data_throughput.py [--corpora ../shared/data/corpora] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from bert_pipeline.data.corpus import ingest_documents, split_documents
from bert_pipeline.data.examples import (
    ExampleConfig,
    build_corpus,
    create_examples,
    tokenize_sentences,
    vocab_from_tokenizer,
)
from bert_pipeline.data.tokenizer import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=ROOT.parent / "shared" / "data" / "corpora")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--dupe-factor", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "data_throughput.md")
    args = parser.parse_args()

    sources = [
        {
            "kind": "prose_folder",
            "path": str(args.corpora / "wikitext-2-raw"),
            "glob": "wiki.valid.raw",
            "document_delimiter": r"^ = [^=].* = $",
            "skip_line_regex": r"^ (= )+.*( =)+ $",
        },
        # chesterton-ball.txt holds Latin-1 bytes: decoded with U+FFFD instead of failing
        {
            "kind": "prose_folder",
            "path": str(args.corpora / "gutenberg"),
            "glob": "*.txt",
            "encoding_errors": "replace",
        },
    ]
    load = os.getloadavg()
    docs, t_ingest = _timed(lambda: pd.concat([ingest_documents(s) for s in sources]))
    n_chars = int(docs["text"].str.len().sum())
    sentences, t_split = _timed(split_documents, docs)
    texts = sentences["text"].tolist()
    tok, t_train = _timed(train_tokenizer, texts, vocab_size=args.vocab_size, length=len(texts))
    ids, t_tok = _timed(tokenize_sentences, tok, texts)
    corpus = build_corpus(sentences["doc_id"].tolist(), sentences["sentence_index"].to_numpy(), ids)
    vocab = vocab_from_tokenizer(tok)
    n_tokens = len(corpus.tokens)

    rows = [
        ("ingest (read + documents table)", t_ingest, f"{len(docs) / t_ingest:,.0f} documents/s"),
        ("split_sentences (sentencex)", t_split, f"{n_chars / t_split / 1e6:,.1f} MB/s"),
        (
            f"train WordPiece (vocab {args.vocab_size})",
            t_train,
            f"{n_chars / t_train / 1e6:,.2f} MB/s",
        ),
        ("tokenize (encode_batch_fast)", t_tok, f"{n_tokens / t_tok:,.0f} tokens/s"),
    ]
    results = {}
    for num_proc in (1, 2):
        cfg = ExampleConfig(max_seq_length=args.max_seq_length, dupe_factor=args.dupe_factor)
        best = float("inf")
        for _ in range(args.repeats):
            table, dt = _timed(
                create_examples, corpus, cfg, vocab, num_proc=num_proc, progress=False
            )
            best = min(best, dt)
        results[num_proc] = table
        rows.append(
            (
                f"create_examples num_proc={num_proc} (dupe {args.dupe_factor}, static masks)",
                best,
                f"{table.num_rows / best:,.0f} examples/s; "
                f"{len(docs) * args.dupe_factor / best:,.0f} documents/s",
            )
        )
    assert results[1].equals(results[2]), "num_proc changed the examples"

    command = "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(__file__, ROOT), *sys.argv[1:]]
    )
    lines = [
        "# Pretraining data throughput",
        "",
        f"Command (from the repository root): `{command}`",
        "",
        f"Corpus: WikiText-2 raw valid + {len(list((args.corpora / 'gutenberg').glob('*.txt')))} "
        f"Gutenberg books = {len(docs)} documents, {n_chars / 1e6:.2f} M characters, "
        f"{len(sentences):,} sentences, {n_tokens:,} tokens; {results[1].num_rows:,} examples "
        f"(max_seq_length {args.max_seq_length}, dupe_factor {args.dupe_factor}); "
        "num_proc 1 and 2 gave identical tables.",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
        f"Python {platform.python_version()}. The cores were shared with other jobs running at "
        f"the same time (1-minute load average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} "
        "after), so the numbers are a lower bound and the num_proc=2 speed-up is noisy.",
        "",
        "| stage | seconds | throughput |",
        "|---|---:|---|",
        *[f"| {name} | {sec:.2f} | {rate} |" for name, sec, rate in rows],
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
