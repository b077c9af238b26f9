"""The paper's Table 5 (pretraining tasks) and Figure 5 (fine-tuning vs pretraining steps), run
through the project's own commands: this tool only calls `kedro run` and collects.

Rows: `bert` (MLM + NSP), `no_nsp` (MLM only), `ltr` (LTR & No NSP: a left-to-right LM, causal at
fine-tuning too) and `ltr_bilstm` (the `ltr` model with a randomly initialised BiLSTM between the
encoder and each task head). Every row fine-tunes with the same protocol: each (learning rate,
seed) is one `kedro run` of one trial, the learning rate with the best mean dev score over the
seeds is kept, and a cell is that mean and its standard deviation over the seeds.

    # pretrain each row with the budget recipe (resumes a row whose run was cut off)
    python benchmarks/ablation.py pretrain --work /data/ablation --rows bert no_nsp ltr
    # GLUE tasks and the SQuAD slice for every row, three seeds
    python benchmarks/ablation.py finetune --work /data/ablation --seeds 1 2 3
    # Figure 5: one task fine-tuned from every kept pretraining checkpoint of bert and ltr
    python benchmarks/ablation.py curve --work /data/ablation --task mrpc
    python benchmarks/ablation.py report --work /data/ablation

`--env` (default budget) and `--set key=value` (any runtime parameter, repeatable) reach every
`kedro run`; the reports name them. Data: ../shared/data/glue and ../shared/data/squad.

On a GPU machine without Kedro, MLflow or ../shared (the workplace's lent one), the rows pretrain
through the distributed entry point `bert_pipeline.training.launch` with the same `pretrain_model`
parameters (conf/base merged with the `--env` folder, as Kedro merges them). The examples that
`kedro run --env budget --pipeline pretrain_data` made here travel packed (the columns the
training reads: token ids as uint16, segment-A lengths, NSP labels, document keys), in
xz-compressed parts small enough for the machine's transfer limit (`pack --max-examples N` sends
only the leading shards that hold N examples: a short run then needs one call); each row trains
in its own process session, so it outlives the command that started it:

    # <work>/bert and <work>/no_nsp made here with `kedro run --env budget --pipeline pretrain_data
    # --params data_dir=<work>/<row>` (+ pretrain_data.examples.next_sentence=false); ltr trains
    # on no_nsp's examples
    python benchmarks/ablation.py pack --work /data/ablation --rows bert no_nsp ltr --out .abl
    # there, once per batch of parts (PYTHONPATH=src:benchmarks)
    python benchmarks/ablation.py gpu-start --packed .abl --work /tmp/ablation
    python benchmarks/ablation.py gpu-collect --work /tmp/ablation --out $OUT --wait 540
    # here: the returned files into <work>/<row>/ (06_models, 08_reporting, the log and the
    # parameters), then finetune/curve/report as above
    python benchmarks/ablation.py restore --work /data/ablation --files <returned files>
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import (
    ROOT,
    SHARED_DATA,
    command_line,
    cpu_name,
    glue_record_path,
    kedro_run_command,
    mean_sd,
)

OUT = Path(__file__).with_suffix(".md")
NO_NSP = {"pretrain_data.examples.next_sentence": "false"}
# row -> (the row whose pretrained model it fine-tunes, pretraining parameters, head parameters)
ROWS = {
    "bert": ("bert", {}, {"classifier_pooling": "cls"}),
    # MLM alone never trains [CLS]: the mean of the last layer (docs/training.md)
    "no_nsp": ("no_nsp", NO_NSP, {"classifier_pooling": "mean"}),
    "ltr": ("ltr", {**NO_NSP, "pretrain_model.objective": "ltr"}, {"classifier_pooling": "last"}),
    "ltr_bilstm": ("ltr", None, {"head_lstm_size": "128"}),
}
LABELS = {
    "bert": "BERT (MLM + NSP)",
    "no_nsp": "No NSP",
    "ltr": "LTR & No NSP",
    "ltr_bilstm": "+ BiLSTM",
}
CURVE_ROWS = ["bert", "ltr"]  # Figure 5: MLM against LTR
SQUAD = "squad"
SQUAD_FILES = {"squad_train": "train-v1.1-slice.json", "squad_dev": "dev-v1.1.json"}


def pipeline_of(task: str) -> tuple[str, list[str]]:
    """The pipeline that fine-tunes `task`, and its extra `kedro run` arguments."""
    return ("finetune_squad", []) if task == SQUAD else ("finetune_glue", [f"--namespaces={task}"])


def kedro_run(
    args: argparse.Namespace, pipeline: str, extra: list[str], params: dict, log: Path
) -> None:
    """One `kedro run` from the checkout's root, its output appended to `log` (a second run of
    the same trial, refused by the first's run lock, keeps the first's log); a failure names it."""
    settings = dict(item.split("=", 1) for item in args.set)
    params = {**params, **settings}
    command = kedro_run_command(pipeline, params, "--env", args.env, *extra)
    log.parent.mkdir(parents=True, exist_ok=True)
    print(shlex.join(command), flush=True)
    with log.open("a") as out:
        out.write(f"$ {shlex.join(command)}\n")
        out.flush()
        code = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    if code:
        sys.exit(f"failed ({code}): {shlex.join(command)}; see {log}")


def model_dir(work: Path, row: str) -> Path:
    return work / ROWS[row][0] / "06_models" / "bert_pretrained"


def pretrained_rows(rows: list[str]) -> list[str]:
    """`rows`, refused in one line if one of them only fine-tunes another row's model."""
    for row in rows:
        if ROWS[row][1] is None or ROWS[row][0] != row:
            sys.exit(f"row {row} fine-tunes the {ROWS[row][0]} model: pretrain {ROWS[row][0]}")
    return rows


def pretrain(args: argparse.Namespace) -> None:
    for row in pretrained_rows(args.rows):
        params = ROWS[row][1]
        data = args.work / row
        if model_dir(args.work, row).is_dir():
            print(f"{row}: pretrained already ({model_dir(args.work, row)})")
            continue
        resume = (data / "06_models" / "pretrain_checkpoints" / "last.ckpt").exists()
        started = time.time()
        kedro_run(
            args,
            "pretrain",
            [],
            {
                "data_dir": data,
                **params,
                "pretrain_model.keep_checkpoints": "true",
                "pretrain_model.resume": "true" if resume else "false",
            },
            args.work / "logs" / f"pretrain_{row}.txt",
        )
        (data / "ablation_pretrain.json").write_text(
            json.dumps(
                {
                    "row": row,
                    "seconds": time.time() - started,
                    "resumed": resume,
                    "device": cpu_name(),
                    "includes": "the examples and the pretraining",
                }
            )
        )


def task_params(task: str, model: Path, head: dict, lr: str, seed: int, data: Path) -> dict:
    """The runtime parameters of one trial of `task` (a GLUE task or SQuAD)."""
    if task == SQUAD:  # a span head reads every token: no classifier_pooling
        root = "finetune_squad.training"
        files = {"squad_dir": SHARED_DATA / "squad", **SQUAD_FILES, "squad_model_dir": model}
        head = {k: v for k, v in head.items() if k != "classifier_pooling"}
    else:
        root = "finetune_glue.defaults"
        files = {"glue_raw_dir": SHARED_DATA / "glue", "glue_model_dir": model}
    trial = {"learning_rates": f"[{lr}]", "seeds": f"[{seed}]", "progress_bar": "false", **head}
    return {"data_dir": data, **files, **{f"{root}.{k}": v for k, v in trial.items()}}


def trial_record(task: str, data: Path) -> Path:
    if task == SQUAD:
        return data / "08_reporting" / "squad_metrics.json"
    return glue_record_path(data, task)


def finetune(args: argparse.Namespace) -> None:
    for row in args.rows:
        model = model_dir(args.work, row)
        if not model.is_dir():
            sys.exit(f"row {row}: no pretrained model at {model}; run `pretrain` first")
        for task in args.tasks:
            for lr in args.lrs:
                for seed in args.seeds:
                    data = args.work / "finetune" / row / task / f"lr{lr}_seed{seed}"
                    if trial_record(task, data).is_file():
                        continue
                    params = task_params(task, model, ROWS[row][2], lr, seed, data)
                    kedro_run(args, *pipeline_of(task), params, data / "log.txt")


def export_checkpoints(row: str, work: Path) -> list[tuple[int, Path]]:
    """Every kept pretraining checkpoint of `row` as an HF folder (with the row's tokenizer)."""
    import torch

    from bert_pipeline.data.tokenizer import load_tokenizer
    from bert_pipeline.model import BertConfig, BertForPreTraining
    from bert_pipeline.model.checkpoint import model_to_checkpoint, write_checkpoint

    data = work / row
    config = json.loads((model_dir(work, row) / "config.json").read_text())
    tokenizer = load_tokenizer(data / "06_models" / "tokenizer")
    out = []
    for path in sorted((data / "06_models" / "pretrain_checkpoints").glob("step-*.ckpt")):
        step = int(path.stem.split("-")[1])
        folder = work / "curve" / row / f"step-{step}"
        if not folder.is_dir():
            state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
            model = BertForPreTraining(BertConfig.from_dict(config))
            model.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("model.")})
            write_checkpoint(model_to_checkpoint(model, tokenizer), folder)
        out.append((step, folder))
    return sorted(out)


def curve(args: argparse.Namespace) -> None:
    for row in args.rows:
        steps = dict(export_checkpoints(row, args.work))
        metrics = args.work / row / "08_reporting" / "pretrain_metrics.json"
        last = json.loads(metrics.read_text())["global_step"]
        steps.setdefault(last, model_dir(args.work, row))  # the exported model ends the curve
        for step, folder in sorted(steps.items()):
            data = args.work / "curve_finetune" / row / f"step-{step}"
            if trial_record(args.task, data).is_file():
                continue
            params = task_params(args.task, folder, ROWS[row][2], args.lrs[0], args.seeds[0], data)
            kedro_run(args, *pipeline_of(args.task), params, data / "log.txt")


def data_params(row: str) -> dict:
    return {k: v for k, v in (ROWS[row][1] or {}).items() if k.startswith("pretrain_data.")}


def examples_row(row: str) -> str:
    """The first row pretrained on the same examples as `row` (the same pretrain_data settings)."""
    return next(r for r in ROWS if ROWS[r][1] is not None and data_params(r) == data_params(row))


def pack(args: argparse.Namespace) -> None:
    """Each row's examples (already made here) as xz parts: <row>.partK-of-N.xz."""
    import numpy as np
    import pandas as pd

    from bert_pipeline.data.shards import load_example_shards

    args.out.mkdir(parents=True, exist_ok=True)
    for row in dict.fromkeys(examples_row(r) for r in pretrained_rows(args.rows)):
        folder = args.work / row / "05_model_input" / "pretraining_examples"
        shards = first_examples(load_example_shards(folder), args.max_examples)
        made = shards.manifest["parameters"]
        if made.get("masking") != "dynamic":
            sys.exit(f"{folder}: only dynamically masked examples travel (no stored masks)")
        nsp = data_params(row).get("pretrain_data.examples.next_sentence", "true")
        if str(made.get("next_sentence")).lower() != nsp:
            sys.exit(
                f"{folder}: made with next_sentence={made.get('next_sentence')}, {row} needs {nsp}"
            )
        table = shards.table()
        ids = table.column("input_ids").combine_chunks()
        lengths = np.diff(ids.offsets.to_numpy())
        types = table.column("token_type_ids").combine_chunks().values.to_numpy()
        a_len = lengths - np.add.reduceat(types, ids.offsets.to_numpy()[:-1], dtype=np.int64)
        values = ids.values.to_numpy()
        if values.max() >= 2**16 or lengths.max() >= 2**8:
            sys.exit(f"{row}: token ids or lengths too large for the packed format")
        if not np.array_equal(types, segment_types(lengths, a_len)):
            sys.exit(f"{row}: token_type_ids are not one A run then one B run")
        codes, doc_ids = pd.factorize(table.column("a_doc_id").to_numpy(zero_copy_only=False))
        arrays = io.BytesIO()
        np.savez(
            arrays, ids=values.astype(np.uint16), lengths=lengths.astype(np.uint8),
            a_len=a_len.astype(np.uint8), doc=codes.astype(np.int32),
            nsp=table.column("next_sentence_label").to_numpy().astype(np.int8),
        )  # fmt: skip
        meta = {"manifest": shards.manifest, "doc_ids": list(doc_ids)}
        tokenizer = args.work / row / "06_models" / "tokenizer"
        raw = tar_bytes(
            {"arrays.npz": arrays.getvalue(), "meta.json": json.dumps(meta).encode()}
            | {f"tokenizer/{p.name}": p.read_bytes() for p in tokenizer.iterdir()}
        )
        size = max(1, int(args.part_mib * 2**20))
        chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
        with ProcessPoolExecutor(os.cpu_count()) as pool:
            for k, part in enumerate(pool.map(lzma.compress, chunks), 1):
                path = args.out / f"{row}.part{k}-of-{len(chunks)}.xz"
                path.write_bytes(part)
                print(f"{path}: {len(part) / 2**20:.1f} MiB", flush=True)


def first_examples(shards, limit: int | None):
    """The leading whole shards that hold at least `limit` examples (all without one): a short
    screen trains on part of the examples, and that part fits one call's transfer."""
    if limit is None:
        return shards
    kept, total = [], 0
    for shard in shards.manifest["shards"]:
        if total >= limit:
            break
        kept.append(shard)
        total += shard["rows"]
    manifest = {**shards.manifest, "shards": kept, "n_examples": total}
    return type(shards)(parts=shards.parts[: len(kept)], manifest=manifest)


def segment_types(lengths, a_len):
    """token_type_ids of rows that are `a_len` zeros then ones, concatenated."""
    import numpy as np

    runs = np.column_stack([a_len, lengths - a_len]).ravel()
    return np.repeat(np.tile(np.array([0, 1], np.int8), len(lengths)), runs)


def tar_bytes(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def unpack(parts: list[Path], folder: Path) -> None:
    """The examples folder (shards + manifest) and tokenizer of one packed row."""
    import numpy as np
    import pyarrow as pa

    from bert_pipeline.data.shards import MANIFEST_FILE, write_shard

    raw = b"".join(lzma.decompress(p.read_bytes()) for p in parts)
    partial = folder.with_name(folder.name + ".partial")  # renamed once whole
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        tar.extractall(partial, filter="data")
    arrays = dict(np.load(partial / "arrays.npz"))
    meta = json.loads((partial / "meta.json").read_text())
    lengths = arrays["lengths"].astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ids = arrays["ids"].astype(np.int32)
    types = segment_types(lengths, arrays["a_len"].astype(np.int64))
    docs = np.asarray(meta["doc_ids"], dtype=object)[arrays["doc"]]
    examples, start, written = partial / "examples", 0, []
    examples.mkdir()
    for shard in meta["manifest"]["shards"]:
        rows = shard["rows"]
        o = offsets[start : start + rows + 1]
        local = pa.array(o - o[0], pa.int32())

        def column(values, kind, o=o, local=local):
            return pa.ListArray.from_arrays(local, pa.array(values[o[0] : o[-1]], kind))

        none = pa.ListArray.from_arrays(
            pa.array(np.zeros(rows + 1, np.int32)), pa.array([], pa.int32())
        )
        table = pa.table({
            "input_ids": column(ids, pa.int32()), "token_type_ids": column(types, pa.int8()),
            "masked_lm_positions": none, "masked_lm_ids": none,
            "next_sentence_label": pa.array(arrays["nsp"][start : start + rows], pa.int8()),
            "a_doc_id": pa.array(docs[start : start + rows], pa.string()),
        })  # fmt: skip
        write_shard(table, examples / shard["file"])
        size = (examples / shard["file"]).stat().st_size
        written.append({"file": shard["file"], "rows": rows, "bytes": size})
        start += rows
    manifest = {**meta["manifest"], "shards": written}
    (examples / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2))
    partial.rename(folder)


def gpu_start(args: argparse.Namespace) -> None:
    """Unpacks the rows whose parts have all arrived and starts their training, once each."""
    from omegaconf import OmegaConf

    other = [item for item in args.set if not item.startswith("pretrain_model.")]
    if other:
        sys.exit(f"--set {other[0]}: gpu-start takes pretrain_model.* only (the data is packed)")
    parts = args.work / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    for path in args.packed.glob("*.xz"):
        shutil.move(path, parts / path.name)
    merged = args.work / f"pretrain_model_{args.env}.yml"  # as Kedro merges --env over base
    files = [ROOT / "conf" / env / "parameters_pretrain_model.yml" for env in ("base", args.env)]
    OmegaConf.save(OmegaConf.merge(*map(OmegaConf.load, files)), merged)
    for row in pretrained_rows(args.rows):
        source = examples_row(row)
        data, out = args.work / "data" / source, args.work / row
        found = sorted(
            parts.glob(f"{source}.part*.xz"),
            key=lambda p: int(p.name.split(".part")[1].split("-of-")[0]),
        )
        counts = {int(p.stem.split("-of-")[1]) for p in found}
        if len(counts) > 1:
            sys.exit(f"{parts}: parts of {source} from different packs: {sorted(counts)}")
        needed = counts.pop() if counts else -1
        if not data.is_dir() and len(found) == needed:
            unpack(found, data)
        if not data.is_dir() or (out / "started.json").is_file():
            print(f"{row}: {'started already' if data.is_dir() else f'{len(found)} part(s) here'}")
            continue
        given = {**ROWS[row][1], **dict(item.split("=", 1) for item in args.set)}
        prefix = "pretrain_model."
        sets = {k.removeprefix(prefix): v for k, v in given.items() if k.startswith(prefix)}
        sets |= {
            "keep_checkpoints": "true",
            "checkpoint_dir": out / "checkpoints",
            "progress_bar": "false",
        }
        command = [
            sys.executable, "-m", "bert_pipeline.training.launch",
            "--examples", data / "examples", "--tokenizer", data / "tokenizer",
            "--config", out / "pretrain_model.yml", "--output", out / "output",
            "--set", *(f"{k}={v}" for k, v in sets.items()),
        ]  # fmt: skip
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(merged, out / "pretrain_model.yml")  # the record of what trained the row
        with (out / "log.txt").open("w") as log:
            started = subprocess.Popen(
                list(map(str, command)), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        record = {"pid": started.pid, "time": time.time(), "command": list(map(str, command))}
        (out / "started.json").write_text(json.dumps(record))
        print(f"{row}: started, {shlex.join(record['command'])}", flush=True)


def gpu_collect(args: argparse.Namespace) -> None:
    """Waits up to --wait seconds for the started rows, then packs what each has reached."""
    import psutil
    import torch

    rows = [r for r in args.rows if (args.work / r / "started.json").is_file()]
    started = {r: json.loads((args.work / r / "started.json").read_text()) for r in rows}
    finished = {r: args.work / r / "output" / "metrics.json" for r in rows}
    deadline = time.time() + args.wait
    while time.time() < deadline and any(
        not finished[r].is_file() and psutil.pid_exists(started[r]["pid"]) for r in rows
    ):
        time.sleep(5)
    args.out.mkdir(parents=True, exist_ok=True)
    for row in rows:
        out, log = args.work / row, (args.work / row / "log.txt").read_text(errors="replace")
        print(f"== {row}: " + "\n".join(log.strip().splitlines()[-3:]), flush=True)
        curve = {}
        for step in args.curve_steps if row in CURVE_ROWS else []:
            path = out / "checkpoints" / f"step-{step}.ckpt"
            if path.is_file():  # weights only, fp16: the optimizer's state stays there
                state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
                halves: dict = {}  # tied weights stay one tensor
                half = {
                    k: halves.setdefault((v.data_ptr(), v.shape), v.half())
                    for k, v in state.items()
                    if k.startswith("model.")
                }
                buffer = io.BytesIO()
                torch.save({"state_dict": half}, buffer)
                curve[f"06_models/pretrain_checkpoints/step-{step}.ckpt"] = buffer.getvalue()
        if curve:
            (args.out / f"{row}_curve.tar").write_bytes(tar_bytes(curve))
        if not finished[row].is_file():
            continue
        files = {"pretrain_log.txt": log.encode()}
        files["pretrain_model.yml"] = (out / "pretrain_model.yml").read_bytes()
        files["ablation_pretrain.json"] = json.dumps({
            "row": row, "seconds": finished[row].stat().st_mtime - started[row]["time"],
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "command": started[row]["command"],
        }).encode()  # fmt: skip
        for path in (out / "output" / "model").iterdir():
            files[f"06_models/bert_pretrained/{path.name}"] = path.read_bytes()
        for path in (args.work / "data" / examples_row(row) / "tokenizer").iterdir():
            files[f"06_models/tokenizer/{path.name}"] = path.read_bytes()
        files["08_reporting/pretrain_history.parquet"] = (
            out / "output" / "history.parquet"
        ).read_bytes()
        files["08_reporting/pretrain_metrics.json"] = finished[row].read_bytes()
        (args.out / f"{row}.tar").write_bytes(tar_bytes(files))


def restore(args: argparse.Namespace) -> None:
    """The files gpu-collect returned, laid out as `pretrain` leaves a row: <work>/<row>/..."""
    for path in args.files:
        row = path.name.split(".")[0].removesuffix("_curve")
        if path.name == f"{row}.tar" and model_dir(args.work, row).is_dir():
            sys.exit(f"{model_dir(args.work, row)} exists: restore into another --work")
        with tarfile.open(path) as tar:
            tar.extractall(args.work / row, filter="data")
        print(f"{row}: {path.name} restored into {args.work / row}")


def trial_score(task: str, record: dict) -> float:
    """The trial's dev score as its pipeline chose it: GLUE's task score, SQuAD's F1."""
    if task == SQUAD:
        return record["dev_metrics"]["f1"]
    return record["score"] * 100


def cell(scores: dict[str, list[float]]) -> tuple[str, float]:
    """The learning rate with the best mean over seeds: 'mean +- sd (lr, n)'."""
    lr, values = max(scores.items(), key=lambda kv: statistics.fmean(kv[1]))
    mean, sd = mean_sd(values)
    return f"{mean:.1f} +- {sd:.1f} (lr {lr}, n={len(values)})", mean


def report(args: argparse.Namespace) -> None:
    rows, tasks = [], []
    results: dict[tuple[str, str], dict[str, list[float]]] = {}
    for path in sorted((args.work / "finetune").glob("*/*/*/")):
        row, task, trial = path.relative_to(args.work / "finetune").parts
        record = trial_record(task, path)
        if not record.is_file():
            continue
        lr = trial.split("_")[0].removeprefix("lr")
        score = trial_score(task, json.loads(record.read_text()))
        results.setdefault((row, task), {}).setdefault(lr, []).append(score)
        rows += [row] if row not in rows else []
        tasks += [task] if task not in tasks else []
    rows = [r for r in ROWS if r in rows]
    lines = [
        "# Table 5 and Figure 5 at the budget scale (benchmarks/ablation.py)",
        "",
        f"Command: `{command_line('benchmarks/ablation.py')}`; {time.strftime('%Y-%m-%d')}; "
        f"{cpu_name()}, {os.cpu_count()} cores.",
        "",
        "Dev scores x100 (GLUE: each task's score; SQuAD: F1), mean +- sd over seeds at the "
        "learning rate with the best mean.",
        "",
        "| pretraining | " + " | ".join(tasks) + " |",
        "|---|" + "---:|" * len(tasks),
    ]
    for row in rows:
        cells = [cell(results[row, t])[0] if (row, t) in results else "-" for t in tasks]
        lines.append(f"| {LABELS[row]} | " + " | ".join(cells) + " |")
    lines += pretraining_lines(args.work)
    points, curve_tasks = curve_points(args.work)
    if points:
        lines += ["", "Figure 5: dev score against pretraining steps", "", "| row | step | score |"]
        lines += ["|---|---:|---:|"]
        lines += [f"| {LABELS[r]} | {s} | {v:.1f} |" for r, pts in points.items() for s, v in pts]
        plot(points, args.out.with_suffix(".png"), f"{', '.join(curve_tasks)} dev score")
    lines += ["", args.note] if args.note else []
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def pretraining_lines(work: Path) -> list[str]:
    """Each pretrained row's record: where it ran, steps, minutes, held-out accuracies."""
    lines = ["", "Pretraining, each row's record (held-out accuracies):", ""]
    lines += ["| row | device | steps | minutes (of what) | MLM / LTR | NSP |"]
    lines += ["|---|---|---:|---|---:|---:|"]
    for row in dict.fromkeys(source for source, params, _ in ROWS.values() if params is not None):
        record = work / row / "ablation_pretrain.json"
        metrics = work / row / "08_reporting" / "pretrain_metrics.json"
        if not (record.is_file() and metrics.is_file()):
            continue
        made, m = json.loads(record.read_text()), json.loads(metrics.read_text())
        lm, nsp = m.get("val/mlm_accuracy", m.get("val/ltr_accuracy")), m.get("val/nsp_accuracy")
        minutes = f"{made['seconds'] / 60:.1f} ({made.get('includes', 'the pretraining')})"
        cells = [LABELS[row], made.get("device", "-"), m["global_step"], minutes]
        cells += [f"{100 * v:.1f}%" if v is not None else "-" for v in (lm, nsp)]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return lines


def curve_points(work: Path) -> tuple[dict[str, list[tuple[int, float]]], list[str]]:
    """Each curve row's (step, dev score) points, and the tasks they were fine-tuned on."""
    points: dict[str, list[tuple[int, float]]] = {}
    tasks: set[str] = set()
    for path in sorted((work / "curve_finetune").glob("*/step-*")):
        row, step = path.parent.name, int(path.name.split("-")[1])
        for task in [SQUAD, *(p.name for p in (path / "08_reporting" / "glue").glob("*"))]:
            record = trial_record(task, path)
            if record.is_file():
                score = trial_score(task, json.loads(record.read_text()))
                points.setdefault(row, []).append((step, score))
                tasks.add(task)
    return {row: sorted(pts) for row, pts in points.items()}, sorted(tasks)


def plot(points: dict[str, list[tuple[int, float]]], path: Path, ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for row, pts in points.items():
        ax.plot([s for s, _ in pts], [v for _, v in pts], marker="o", label=LABELS[row])
    ax.set_xlabel("pretraining steps")
    ax.set_ylabel(ylabel)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = {
        "pretrain": pretrain, "finetune": finetune, "curve": curve, "report": report,
        "pack": pack, "gpu-start": gpu_start, "gpu-collect": gpu_collect, "restore": restore,
    }  # fmt: skip
    parser.add_argument("command", choices=list(commands))
    parser.add_argument("--work", type=Path, required=True, help="folder of every run's data")
    parser.add_argument("--rows", nargs="+", default=None, choices=list(ROWS))
    parser.add_argument("--tasks", nargs="+", default=["mrpc", "sst2", "stsb", "rte", SQUAD])
    parser.add_argument("--task", default="mrpc", help="the curve's task")
    parser.add_argument("--lrs", nargs="+", default=["1e-4", "3e-4", "1e-3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--env", default="budget")
    parser.add_argument("--set", action="append", default=[], help="key=value for every run")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="report; pack's and gpu-collect's folder"
    )
    parser.add_argument(
        "--packed", type=Path, default=Path(".abl"), help="gpu-start: arrived parts"
    )
    parser.add_argument("--part-mib", type=float, default=24, help="pack: raw MiB per xz part")
    parser.add_argument(
        "--max-examples", type=int, default=None,
        help="pack: only the leading whole shards holding this many examples (default: all)",
    )  # fmt: skip
    parser.add_argument("--wait", type=float, default=540, help="gpu-collect: seconds at most")
    parser.add_argument("--curve-steps", nargs="+", type=int, default=[2000, 6000])
    parser.add_argument("--note", default="", help="report: text below the tables")
    parser.add_argument("--files", nargs="+", type=Path, default=[], help="restore: returned files")
    args = parser.parse_args()
    defaults = {
        "pretrain": ["bert", "no_nsp", "ltr"],
        "finetune": list(ROWS),
        "curve": CURVE_ROWS,
        "report": list(ROWS),
    }
    args.rows = args.rows or defaults.get(args.command, defaults["pretrain"])
    commands[args.command](args)


if __name__ == "__main__":
    main()
