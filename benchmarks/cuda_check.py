"""The project's training paths on a CUDA device, each checked the way a user runs it.

A GPU machine (torch, lightning, tokenizers; no Kedro or MLflow needed) runs, from example
shards and a tokenizer that `kedro run --pipeline pretrain_data` made elsewhere:

1. `precision: auto` / `compile: auto` as chosen on the device;
2. pretraining through `bert_pipeline.training.launch` under torchrun with DDP (NCCL), bf16,
   torch.compile and deterministic kernels;
3. the same run killed (SIGKILL) after a checkpoint and resumed: the exported weights compared
   with the uninterrupted run's, bit for bit;
4. the paper's "LTR & No NSP" objective (`objective: ltr`);
5. fine-tuning: GLUE RTE in fp32 and bf16, with the "+ BiLSTM" head (cuDNN LSTM under
   autocast), from the LTR encoder with `classifier_pooling: last`, and SWAG multiple choice;
6. the BiLSTM head alone, bf16 autocast against fp32;
7. optionally (`--throughput tiny base`) tokens/s of presets through the same launcher.

Every check is recorded (pass, the error's last line, seconds) in `--output` (JSON) after each
step, so a run cut off by a time limit still reports what it reached. `--accelerator cpu` runs
the same checks on a CPU (the smoke test).

    python benchmarks/cuda_check.py \\
        --examples .cuda_inputs/mlm/05_model_input/pretraining_examples \\
        --ltr-examples .cuda_inputs/ltr/05_model_input/pretraining_examples \\
        --tokenizer .cuda_inputs/mlm/06_models/tokenizer --work /tmp/cuda_check \\
        --output benchmarks/cuda_check.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import torch
from common import ROOT
from safetensors.torch import load_file

PRETRAIN_CONFIG = ROOT / "conf" / "base" / "parameters_pretrain_model.yml"
GLUE_SAMPLE = ROOT / "data" / "01_raw" / "glue_sample"
SWAG_SAMPLE = ROOT / "data" / "01_raw" / "swag_sample" / "sample.jsonl"


class Checks:
    """Runs named checks, keeps going after a failure, writes the record after each one."""

    def __init__(self, output: Path, header: dict[str, Any], only: list[str] | None = None):
        self.output, self.record, self.only = output, {**header, "checks": {}}, only
        self.write()

    def write(self) -> None:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.output.write_text(json.dumps(self.record, indent=2, default=str), encoding="utf-8")

    def run(self, name: str, check: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        if self.only is not None and name not in self.only:
            return None
        start = time.perf_counter()
        print(f"=== {name}", flush=True)
        try:
            result = check()
            entry = {"ok": True, **result}
        except Exception as exc:  # a failed check is a finding, the next one still runs
            traceback.print_exc()
            result, entry = None, {"ok": False, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
        entry["seconds"] = round(time.perf_counter() - start, 1)
        self.record["checks"][name] = entry
        self.write()
        print(f"=== {name}: {json.dumps(entry, default=str)[:1500]}", flush=True)
        return result


def launcher(
    args: argparse.Namespace, examples: Path, out: Path, sets: list[str], torchrun: bool
) -> list[str]:
    """The documented entry point, under torchrun (one process per device) or alone."""
    head = [sys.executable, "-m"]
    if torchrun:
        head += ["torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m"]
    return [
        *head, "bert_pipeline.training.launch", "--examples", str(examples),
        "--tokenizer", str(args.tokenizer), "--config", str(PRETRAIN_CONFIG),
        "--output", str(out), "--set", *sets,
    ]  # fmt: skip


def pretrain_sets(args: argparse.Namespace, checkpoints: Path, *extra: str) -> list[str]:
    return [
        f"accelerator={args.accelerator}", "precision=auto", "compile=auto",
        "deterministic=true", "progress_bar=false", f"batch_size={args.batch_size}",
        f"schedule.max_steps={args.steps}", f"schedule.warmup_steps={args.steps // 10}",
        f"checkpoint_every_n_steps={args.steps // 3}", f"val_every_n_steps={args.steps // 3}",
        f"checkpoint_dir={checkpoints}", *extra,
    ]  # fmt: skip


def run_logged(command: list[str], log: Path, timeout: float) -> None:
    with log.open("w") as sink:
        done = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout)
    if done.returncode:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        raise RuntimeError(f"exit {done.returncode}: " + " | ".join(tail))


def summary(out: Path) -> dict[str, Any]:
    metrics = json.loads((out / "metrics.json").read_text())
    return {k: v for k, v in metrics.items() if not isinstance(v, (dict, list))}


def pretrain(args, name: str, examples: Path, *extra: str, torchrun: bool = False) -> dict:
    out = args.work / name
    sets = pretrain_sets(args, args.work / f"{name}_ckpt", *extra)
    run_logged(launcher(args, examples, out, sets, torchrun), args.work / f"{name}.log", 900)
    return summary(out)


def kill_and_resume(args) -> dict:
    """Killed once the second checkpoint exists, resumed with `resume=true`, compared with the
    uninterrupted run of `pretrain_torchrun_ddp` (same seed and settings), which must run first."""
    out, ckpt = args.work / "resumed", args.work / "resumed_ckpt"
    sets = pretrain_sets(args, ckpt, "strategy=ddp")
    second = ckpt / f"step-{2 * (args.steps // 3)}.ckpt"
    with (args.work / "resumed_killed.log").open("w") as sink:
        proc = subprocess.Popen(
            launcher(args, args.examples, out, sets, True),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        while not second.exists() and proc.poll() is None:
            time.sleep(0.05)
        # torchrun starts each rank in a session of its own: kill the ranks, not only torchrun
        for child in [*psutil.Process(proc.pid).children(recursive=True), proc]:
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                child.send_signal(signal.SIGKILL)
        proc.wait()
        psutil.wait_procs(psutil.Process().children(recursive=True), timeout=30)
    if not second.exists():
        raise RuntimeError(f"no {second.name} before the run ended: see resumed_killed.log")
    run_logged(
        launcher(args, args.examples, out, [*sets, "resume=true"], True),
        args.work / "resumed.log",
        900,
    )
    ours = load_file(out / "model" / "model.safetensors")
    straight = load_file(args.work / "mlm" / "model" / "model.safetensors")
    diff = max((ours[k].float() - straight[k].float()).abs().max().item() for k in straight)
    identical = all(torch.equal(ours[k], straight[k]) for k in straight)
    return {"killed_after": second.name, "bit_identical": identical, "max_abs_diff": diff}


def base_params(pipeline: str) -> dict[str, Any]:
    """conf/base's parameters of `pipeline`, read without Kedro as the launcher reads its file."""
    from bert_pipeline.training.launch import read_params

    params = read_params(ROOT / "conf" / "base" / f"parameters_{pipeline}.yml")
    return params.get(pipeline, params)


def finetune_glue(args, model: str, **overrides: Any) -> dict:
    from bert_pipeline.glue.config import glue_params
    from bert_pipeline.glue.finetune import finetune_task
    from bert_pipeline.glue.loading import load_glue_tsv_task
    from bert_pipeline.glue.tasks import get_task
    from bert_pipeline.model.checkpoint import read_checkpoint

    params = base_params("finetune_glue")
    params["defaults"].update(
        accelerator=args.accelerator, progress_bar=False, seeds=[1], **overrides
    )
    task = get_task("rte")
    raw = load_glue_tsv_task(GLUE_SAMPLE, task)
    config = glue_params(params).task_config("rte")
    checkpoint = read_checkpoint(args.work / model / "model")
    result = finetune_task(task, raw["train"], raw["dev"], raw["test"], checkpoint, config)
    return {"dev": result.dev_metrics, "best": result.best}


def finetune_swag(args, **overrides: Any) -> dict:
    from bert_pipeline.model.checkpoint import read_checkpoint
    from bert_pipeline.swag.config import swag_params
    from bert_pipeline.swag.data import read_swag, split_by_context
    from bert_pipeline.swag.finetune import finetune_swag as run

    params = base_params("finetune_swag")
    params["training"].update(accelerator=args.accelerator, progress_bar=False, **overrides)
    parsed = swag_params(params)
    train, dev = split_by_context(
        read_swag(SWAG_SAMPLE), parsed.data.dev_share, parsed.data.split_seed
    )
    result = run(train, dev, dev.iloc[:0], read_checkpoint(args.work / "mlm" / "model"),
                 parsed.training)  # fmt: skip
    return {"dev": result.record["dev_metrics"], "best": result.record["best"]}


def lstm_autocast(args) -> dict:
    """The BiLSTM head on padded input: bf16 autocast against fp32, outputs and gradients."""
    from bert_pipeline.model.bert import HeadLSTM
    from bert_pipeline.model.config import BertConfig

    device = (
        "cuda"
        if args.accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available()
        else "cpu"
    )
    torch.manual_seed(0)
    config = BertConfig(hidden_size=128, num_attention_heads=2, head_lstm_size=64)
    head = HeadLSTM(config).to(device)
    x = torch.randn(8, 64, 128, device=device, requires_grad=True)
    mask = (torch.arange(64, device=device) < torch.randint(1, 65, (8, 1), device=device)).long()
    full, final = head(x, mask)
    (full.sum() + final.sum()).backward()
    grad = x.grad.clone()
    x.grad = None
    with torch.autocast(device, dtype=torch.bfloat16):
        full16, final16 = head(x, mask)
    (full16.float().sum() + final16.float().sum()).backward()
    return {
        "device": device,
        "dtype_under_autocast": str(full16.dtype),
        "max_abs_diff_out": (full16.float() - full).abs().max().item(),
        "max_abs_diff_final": (final16.float() - final).abs().max().item(),
        "max_abs_diff_grad": (x.grad - grad).abs().max().item(),
        "grad_finite": bool(torch.isfinite(x.grad).all()),
    }


def machine_choice(args) -> dict:
    from bert_pipeline.training.hardware import bf16_units, choose

    choice = choose("auto", "auto", args.accelerator)
    return {"bf16_units": bf16_units(args.accelerator), **vars(choice)}


def throughput(args, preset: str) -> dict:
    """A preset through the launcher, without deterministic kernels: the median of the logged
    tokens/s windows of the second half of the run (after compilation)."""
    import pandas as pd

    out = args.work / f"throughput_{preset}"
    sets = [*pretrain_sets(args, out / "ckpt"), f"model.preset={preset}", "deterministic=false",
            "schedule.max_steps=100", "val_every_n_steps=100", "checkpoint_every_n_steps=100",
            "log_every_n_steps=10"]  # fmt: skip
    run_logged(launcher(args, args.examples, out, sets, False), out.with_suffix(".log"), 900)
    history = pd.read_parquet(out / "history.parquet")
    rate = history[(history["metric"] == "train/tokens_per_sec") & (history["step"] > 50)]
    return {"preset": preset, "batch_size": args.batch_size, **summary(out),
            "tokens_per_sec_median_after_step_50": float(rate["value"].median())}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=Path, required=True, help="MLM + NSP example shards")
    parser.add_argument("--ltr-examples", type=Path, required=True, help="next_sentence=false")
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="scratch folder")
    parser.add_argument("--output", type=Path, required=True, help="the JSON record")
    parser.add_argument("--accelerator", default="gpu", help="gpu, or cpu for the smoke test")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--throughput", nargs="*", default=[], help="presets to time (tiny base)")
    parser.add_argument("--checks", nargs="*", default=None, help="run only these (and no others)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    header = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "argv": sys.argv[1:],
    }
    checks = Checks(args.output, header, args.checks)
    checks.run("machine_choice", lambda: machine_choice(args))
    checks.run("pretrain_torchrun_ddp", lambda: pretrain(args, "mlm", args.examples,
               "strategy=ddp", torchrun=True))  # fmt: skip
    checks.run("kill_and_resume", lambda: kill_and_resume(args))
    checks.run("pretrain_ltr", lambda: pretrain(args, "ltr", args.ltr_examples, "objective=ltr"))
    checks.run("lstm_autocast", lambda: lstm_autocast(args))
    checks.run("glue_rte_fp32", lambda: finetune_glue(args, "mlm", precision="32"))
    checks.run("glue_rte_bf16", lambda: finetune_glue(args, "mlm", precision="auto"))
    checks.run("glue_rte_bf16_bilstm", lambda: finetune_glue(args, "mlm", precision="auto",
               head_lstm_size=32))  # fmt: skip
    checks.run("glue_rte_ltr_last_bilstm", lambda: finetune_glue(args, "ltr", precision="auto",
               head_lstm_size=32, classifier_pooling="last"))  # fmt: skip
    checks.run("swag_bf16", lambda: finetune_swag(args, precision="auto"))
    checks.run("swag_bf16_bilstm", lambda: finetune_swag(args, precision="auto",
               head_lstm_size=32))  # fmt: skip
    for preset in args.throughput:
        checks.run(f"throughput_{preset}", lambda preset=preset: throughput(args, preset))
    failed = [n for n, c in checks.record["checks"].items() if not c["ok"]]
    print("failed:", failed or "none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
