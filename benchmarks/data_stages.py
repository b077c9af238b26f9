"""Seconds per MB of each `pretrain_data` stage in one process (one Dask worker's work), against a
baseline revision, and whether both revisions write the same example shards byte for byte.

Each repeat runs every stage once per side in a fresh subprocess, the sides interleaved (current,
baseline, current, ...) so that both see the same machine load; the report gives medians and the
1-minute load average beside each sample. The stages are the pipeline's own functions, shard by
shard of `documents_per_shard` documents as `example_shards` cuts them: ingestion (reading the
WikiExtractor files), sentence splitting, WordPiece, example creation, Pandera validation (of
documents, sentences and example shards), writing (the documents and sentences as Parquet, the
example shards) and the shard statistics (of the table in memory, as the pipeline counts a shard
since it stopped reading the shards back for the report). The baseline is a git revision checked
out into a temporary worktree and imported through PYTHONPATH from the same virtual environment.

    python benchmarks/data_stages.py --mb 10 --repeats 3 --baseline bfd6b54 \\
        [--corpus ../shared/data/corpora/wikipedia-en | data/01_raw/sample_corpus]

The table replaces the per-stage section at the end of benchmarks/data_scale.md (`--output`).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    DATA_STAGES_HEADING,
    ROOT,
    SHARED_DATA,
    baseline_checkout,
    command_line,
    cpu_name,
    minilm_dir,
    split_at_stages,
    text_size,
)

STAGES = [
    "ingestion",
    "sentence splitting",
    "WordPiece",
    "example creation",
    "Pandera validation",
    "writing",
    "statistics",
]


def corpus_source(corpus: Path, megabytes: float | None, folder: Path) -> tuple[dict, int]:
    """The pretrain_corpus keys of the first files of `corpus` holding `megabytes` MB of text
    (WikiExtractor .gz files), or of the prose folder `corpus` itself; and its size in bytes."""
    files = sorted(corpus.glob("A?/wiki_*.gz"))
    if not files:
        size = sum(p.stat().st_size for p in corpus.iterdir() if p.is_file())
        return {"kind": "prose_folder", "path": str(corpus)}, size
    total = 0
    for f in files:
        if megabytes is not None and total >= megabytes * 1e6:
            break
        link = folder / f.parent.name / f.name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(f.resolve())
        total += text_size(f)
    return {"kind": "wikiextractor", "path": str(folder)}, total


def shards(sentences, documents_per_shard: int):
    """The sentence rows of each shard, cut as `stages.shard_divisions` cuts documents."""
    import numpy as np

    new_doc = np.ones(len(sentences), dtype=bool)
    doc = sentences["doc_id"].to_numpy(dtype=object)
    new_doc[1:] = doc[1:] != doc[:-1]
    number = np.cumsum(new_doc) - 1
    n_docs = int(number[-1]) + 1
    n_shards = max(1, n_docs // documents_per_shard)
    starts = [n_docs * k // n_shards for k in range(n_shards)] + [n_docs]
    for k in range(n_shards):
        rows = (number >= starts[k]) & (number < starts[k + 1])
        yield k, sentences[rows].reset_index(drop=True)


def run_stages(source: dict, out: Path, documents_per_shard: int, dupe_factor: int) -> dict:
    """One process's seconds per stage and the sha256 of every shard file it writes."""
    from bert_pipeline.data.corpus import ingest_documents, split_documents
    from bert_pipeline.data.examples import (
        ExampleConfig,
        build_corpus,
        create_examples,
        tokenize_sentences,
        vocab_from_tokenizer,
    )
    from bert_pipeline.data.shards import shard_name, write_shard
    from bert_pipeline.data.stats import partial_statistics
    from bert_pipeline.data.tokenizer import tokenizer_from_vocab
    from bert_pipeline.schemas.pretraining import (
        DocumentsSchema,
        SentencesSchema,
        _validate_shard,
        check_examples_against_parameters,
        validate_frame,
    )

    seconds = dict.fromkeys([*STAGES, "setup"], 0.0)
    cpu_seconds = dict.fromkeys(seconds, 0.0)
    clock = (time.perf_counter(), time.process_time())

    def lap(stage: str) -> None:
        nonlocal clock
        now = (time.perf_counter(), time.process_time())
        seconds[stage] += now[0] - clock[0]
        cpu_seconds[stage] += now[1] - clock[1]
        clock = now

    # what a Dask worker has done before its first task: import dask.dataframe (pandera imports
    # it when it first builds a schema from a DataFrameModel) and build those schemas
    import dask.dataframe  # noqa: F401

    DocumentsSchema.to_schema(), SentencesSchema.to_schema()
    lap("setup")
    tokenizer = tokenizer_from_vocab(minilm_dir() / "vocab.txt")
    cfg = ExampleConfig(dupe_factor=dupe_factor, documents_per_shard=documents_per_shard)
    vocab = vocab_from_tokenizer(tokenizer)
    lap("WordPiece")
    documents = ingest_documents(source)
    lap("ingestion")
    validate_frame(DocumentsSchema, documents, "documents")
    lap("Pandera validation")
    documents.to_parquet(out / "documents.parquet")
    lap("writing")
    sentences = split_documents(documents, progress=False)
    lap("sentence splitting")
    validate_frame(SentencesSchema, sentences, "sentences")
    lap("Pandera validation")
    sentences.to_parquet(out / "sentences.parquet")
    lap("writing")
    try:  # a worker remembers the words of its earlier shards (not in older revisions)
        from bert_pipeline.data.tokenizer import WordIds

        known = (WordIds(),)
    except ImportError:
        known = ()
    digests = []
    for k, frame in shards(sentences, documents_per_shard):
        tokens = tokenize_sentences(tokenizer, frame["text"].tolist(), *known)
        lap("WordPiece")
        # the baseline's tokenize_sentences returns one list of ids per sentence
        flat = tokens if isinstance(tokens, tuple) else (tokens,)
        doc_ids, index = frame["doc_id"].tolist(), frame["sentence_index"].to_numpy()
        table = create_examples(build_corpus(doc_ids, index, *flat), cfg, vocab, k, False)
        check_examples_against_parameters(table, cfg.max_seq_length, vocab.size)
        lap("example creation")
        _validate_shard(table, shard_name(k))
        lap("Pandera validation")
        path = out / shard_name(k)
        write_shard(table, path)
        lap("writing")
        partial_statistics(table, cfg, vocab)  # as the worker does, while it holds the table
        lap("statistics")
        digests.append(hashlib.sha256(path.read_bytes()).hexdigest())
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "shards": digests,
        "sentences": len(sentences),
    }


def tokenizer_options(source: dict, documents_per_shard: int, repeats: int) -> dict:
    """CPU seconds per MB of text of the ways to get a shard's token ids from `tokenizers`."""
    from bert_pipeline.data.corpus import ingest_documents, split_documents
    from bert_pipeline.data.examples import tokenize_sentences
    from bert_pipeline.data.tokenizer import split_words, tokenizer_from_vocab, word_boundaries

    tok = tokenizer_from_vocab(minilm_dir() / "vocab.txt")
    _, frame = next(shards(split_documents(ingest_documents(source)), documents_per_shard))
    texts = frame["text"].tolist()
    words = split_words(texts, word_boundaries(tok))[0].to_pylist()

    def encode(inputs, **kwargs) -> list:
        return [e.ids for e in tok.encode_batch_fast(inputs, add_special_tokens=False, **kwargs)]

    options = {
        "every sentence, encode_batch_fast (before)": lambda: encode(texts),
        "every sentence split at spaces, is_pretokenized=True": lambda: encode(
            [t.split(" ") for t in texts], is_pretokenized=True
        ),
        "each distinct word, one Encoding per word": lambda: encode(words),
        "each distinct word, a thousand per Encoding (tokenize_sentences)": lambda: (
            tokenize_sentences(tok, texts)
        ),
    }
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    seconds = {name: [] for name in options}
    for _ in range(repeats):
        for name, run in options.items():
            start = time.process_time()
            run()
            seconds[name].append(time.process_time() - start)
    return {name: statistics.median(s) / mb for name, s in seconds.items()}


def checkouts(baseline: str | None, tree: Path | None) -> dict[str, dict[str, str]]:
    """side name -> environment of the subprocess that measures it."""
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    sides = {"current": env}
    if tree:
        sides[f"baseline {baseline}"] = {**env, "PYTHONPATH": str(tree / "src")}
    return sides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=SHARED_DATA / "corpora" / "wikipedia-en")
    parser.add_argument("--mb", type=float, default=10.0, help="MB of WikiExtractor text")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", help="git revision to compare with (e.g. a commit of main)")
    parser.add_argument("--documents-per-shard", type=int, default=2000)
    parser.add_argument("--dupe-factor", type=int, default=5)
    parser.add_argument(
        "--output",
        type=Path,
        default=ROOT / "benchmarks" / "data_scale.md",
        help="the report whose per-stage section (at its end) this run replaces",
    )
    parser.add_argument("--note", default="", help="a line under the table")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # JSON source: measure in this process
    parser.add_argument("--options", help=argparse.SUPPRESS)  # JSON source: tokenizer options
    args = parser.parse_args()
    if args.side:
        side = json.loads(args.side)
        result = run_stages(side["source"], Path(side["out"]), *side["shape"])
        print(json.dumps(result))
        return
    if args.options:
        source = json.loads(args.options)
        print(json.dumps(tokenizer_options(source, args.documents_per_shard, args.repeats)))
        return

    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        source, size = corpus_source(args.corpus, args.mb, scratch / "corpus")
        with baseline_checkout(args.baseline, scratch) as tree:
            sides = checkouts(args.baseline, tree)
            samples = measure(args, sides, source, scratch)
            options = subprocess.run(
                [sys.executable, __file__, "--options", json.dumps(source), *options_args(args)],
                env=sides["current"],
                capture_output=True,
                text=True,
                check=True,
            )
    report(args, samples, size, json.loads(options.stdout.strip().splitlines()[-1]))


def options_args(args) -> list[str]:
    return ["--documents-per-shard", str(args.documents_per_shard), "--repeats", str(args.repeats)]


def measure(args, sides: dict, source: dict, scratch: Path) -> dict[str, list[dict]]:
    samples: dict[str, list[dict]] = {side: [] for side in sides}
    for r in range(args.repeats):
        # ABBA order: a load that rises or falls during the runs weighs on both sides alike
        for side, env in list(sides.items())[:: -1 if r % 2 else 1]:
            out = scratch / f"out_{len(samples[side])}_{side.split()[0]}"
            out.mkdir()
            spec = {"source": source, "out": str(out)}
            spec["shape"] = [args.documents_per_shard, args.dupe_factor]
            cmd = [sys.executable, __file__, "--side", json.dumps(spec)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                sys.exit(f"{side} failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["load_1min"] = os.getloadavg()[0]
            samples[side].append(result)
            print(side, r, json.dumps(result["seconds"]), f"load {result['load_1min']:.2f}")
    return samples


def report(args, samples: dict[str, list[dict]], size: int, options: dict[str, float]) -> None:
    mb = size / 1e6
    names = list(samples)
    pair = len(names) == 2
    median = {
        (s, kind): {k: statistics.median(x[kind][k] for x in samples[s]) for k in STAGES}
        for s in names
        for kind in ("cpu_seconds", "seconds")
    }
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    lines = [
        f"Command: `{command_line('benchmarks/data_stages.py')}`; current: {commit}",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores; "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; 1-min load average per "
        "sample: "
        + "; ".join(
            f"{s} " + ", ".join(f"{x['load_1min']:.1f}" for x in samples[s]) for s in names
        ),
        f"Input: {mb:.1f} MB of text, {samples[names[0]][0]['sentences']:,} sentences; "
        f"documents_per_shard {args.documents_per_shard}, dupe_factor {args.dupe_factor}; one "
        f"process, RAYON_NUM_THREADS=1; medians of {args.repeats} runs per side, interleaved. "
        "CPU seconds (the process's own) per MB of text: other work on the machine slows the "
        "wall clock more than it does them.",
        "",
        "| stage | " + " | ".join(f"{s} CPU s/MB" for s in names) + " |" + " ratio |" * pair,
        "|---|" + "---:|" * (len(names) + pair),
    ]
    for stage in [*STAGES, "total", "total, wall clock"]:
        kind = "seconds" if stage.endswith("wall clock") else "cpu_seconds"
        values = [
            sum(median[s, kind].values()) if stage.startswith("total") else median[s, kind][stage]
            for s in names
        ]
        row = f"| {stage} | " + " | ".join(f"{v / mb:.3f}" for v in values) + " |"
        lines.append(row + (f" {values[1] / values[0]:.1f}x |" if pair else ""))
    digests = {s: [x["shards"] for x in samples[s]] for s in names}
    same = all(d == digests[names[0]][0] for s in names for d in digests[s])
    lines += [
        "",
        f"Example shards byte-identical across all runs and sides: {same} "
        f"({len(digests[names[0]][0])} shards).",
    ]
    lines += [
        "",
        "Token ids of the first shard from `tokenizers` (current code, same process settings):",
        "",
        "| how | CPU s/MB |",
        "|---|---:|",
        *(f"| {name} | {value:.3f} |" for name, value in options.items()),
    ]
    text = "\n".join([DATA_STAGES_HEADING, "", *lines, *(["", args.note] if args.note else [])])
    print(text)
    before, _ = split_at_stages(args.output)
    before = before.rstrip("\n") + "\n\n" if before.strip() else ""
    args.output.write_text(before + text + "\n", encoding="utf-8")
    if not same:
        sys.exit("the example shards differ")


if __name__ == "__main__":
    main()
