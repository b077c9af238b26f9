"""Distributed entry point: one process per device, started by torchrun, SLURM (srun) or the node.

    torchrun --nproc_per_node=4 -m bert_pipeline.training.launch \\
        --examples data/05_model_input/pretraining_examples --tokenizer data/06_models/tokenizer \\
        --config conf/base/parameters_pretrain_model.yml --output data/06_models/run1

Every rank runs `run_training`; global rank 0 writes `<output>/model/` (config.json +
model.safetensors + tokenizer files), `history.parquet` and, last, `metrics.json`. MLflow: rank 0
logs into the run given by `--mlflow-run-id` / $MLFLOW_RUN_ID (the Kedro node passes its own
run), or opens a new run in `--mlflow-experiment` when no run id is given.

The Kedro node uses this module for more than one device instead of letting Lightning re-launch
`kedro run` once per rank (kedro issue #2049): see `launch_subprocess`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
from tokenizers import Tokenizer

from bert_pipeline.data.shards import ExampleShards, load_example_shards
from bert_pipeline.data.tokenizer import load_tokenizer, save_tokenizer
from bert_pipeline.fsutil import atomic_file
from bert_pipeline.model.checkpoint import load_pretrained, save_pretrained
from bert_pipeline.training.config import TrainingConfig
from bert_pipeline.training.trainer import TrainingResult, run_training

logger = logging.getLogger(__name__)

MODEL_DIR, HISTORY_FILE, METRICS_FILE = "model", "history.parquet", "metrics.json"


def _runtime_default(key: str, default: Any = None) -> Any:
    """Kedro's `runtime_params` resolver outside a Kedro run: there are none, so the default."""
    return default


def read_params(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """`pretrain_model` parameters from a YAML/JSON file (with or without that top-level key).

    Resolved with OmegaConf as Kedro's loader resolves it, `${runtime_params:key,default}`
    taking its default (Kedro registers its own resolver again whenever it reads config).
    `overrides` are OmegaConf dot-list items relative to `pretrain_model`
    (`schedule.max_steps=10`).
    """
    from omegaconf import DictConfig, OmegaConf

    OmegaConf.register_resolver("runtime_params", _runtime_default, replace=True)
    path = Path(path)
    data = OmegaConf.load(path)
    if not isinstance(data, DictConfig):
        raise ValueError(f"{path}: expected a mapping of parameters")
    if "pretrain_model" not in data:
        data = OmegaConf.create({"pretrain_model": data})
    merged = OmegaConf.merge(
        data, OmegaConf.from_dotlist([f"pretrain_model.{o}" for o in overrides or []])
    )
    try:
        return OmegaConf.to_container(merged.pretrain_model, resolve=True)
    except Exception as exc:  # an interpolation that points nowhere
        raise ValueError(f"{path}: {exc}".splitlines()[0]) from None


def write_outputs(result: TrainingResult, tokenizer: Tokenizer, output: Path) -> None:
    """Rank 0: exported model, history and metrics; metrics.json last, as the completion marker."""
    output.mkdir(parents=True, exist_ok=True)
    save_pretrained(result.model, output / MODEL_DIR, tokenizer)
    with atomic_file(output / HISTORY_FILE) as tmp:
        result.history.to_parquet(tmp, index=False)
    with atomic_file(output / METRICS_FILE) as tmp:
        tmp.write_text(json.dumps(result.metrics, indent=2), encoding="utf-8")


def flat_params(cfg: TrainingConfig) -> dict[str, Any]:
    """The typed parameters, flattened as kedro-mlflow flattens them (`optimizer.lr`)."""
    return pd.json_normalize(dataclasses.asdict(cfg), sep=".").iloc[0].to_dict()


def _global_rank() -> int:
    for var in ("RANK", "SLURM_PROCID"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def torchrun_world(params: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`devices` and `num_nodes` of torchrun's world (its environment), when it started us.

    The parameters file is the Kedro node's (`devices: 1`), and a Trainer that expects fewer
    processes than torchrun started makes every rank global zero. A `--set` value that
    disagrees with torchrun is refused.
    """
    if "LOCAL_WORLD_SIZE" not in os.environ:
        return params
    local, world = int(os.environ["LOCAL_WORLD_SIZE"]), int(os.environ["WORLD_SIZE"])
    nodes = world // local
    torchrun = {
        "devices": (local, f"torchrun's --nproc_per_node={local}"),
        "num_nodes": (nodes, f"torchrun's {nodes} node(s) ({world} processes, {local} per node)"),
    }
    given = {o.partition("=")[0].strip() for o in overrides}
    for key, (value, source) in torchrun.items():
        if key in given and params.get(key) != value:
            raise ValueError(
                f"--set {key}={params.get(key)} disagrees with {source}; set {key}={value} or "
                "leave it out (the launcher takes it from torchrun)"
            )
    return {**params, "devices": local, "num_nodes": nodes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bert_pipeline.training.launch", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--examples", required=True, help="pretraining_examples folder (shards)")
    parser.add_argument("--tokenizer", required=True, help="folder with tokenizer.json/vocab.txt")
    parser.add_argument("--config", required=True, help="pretrain_model parameters (YAML/JSON)")
    parser.add_argument("--output", required=True, help="folder for model/, history, metrics")
    parser.add_argument("--mlflow-run-id", default=os.environ.get("MLFLOW_RUN_ID"))
    parser.add_argument("--mlflow-tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI"))
    parser.add_argument(
        "--mlflow-experiment", default=None, help="open a new run here if no run id"
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override parameters of the --config file, e.g. schedule.max_steps=100 devices=4",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    try:
        params = torchrun_world(read_params(args.config, args.set), args.set)
    except ValueError as exc:
        parser.error(str(exc))
    tokenizer = load_tokenizer(args.tokenizer)
    shards = load_example_shards(args.examples)
    cfg = TrainingConfig.for_examples(params, shards, where=args.examples)
    shards.check_tokenizer(tokenizer, where=args.examples)

    run_id, close_run = args.mlflow_run_id, None
    if not run_id and args.mlflow_experiment and _global_rank() == 0:
        from bert_pipeline import tracking  # mlflow only for a tracked run: a GPU node may lack it

        uri, params = args.mlflow_tracking_uri, flat_params(cfg)
        run_id = tracking.open_run(args.mlflow_experiment, uri, params)
        close_run = tracking.close_run

    status = "FAILED"
    try:
        result = run_training(
            shards,
            tokenizer,
            cfg,
            mlflow_run_id=run_id,
            mlflow_tracking_uri=args.mlflow_tracking_uri,
        )
        if result.is_global_zero:
            write_outputs(result, tokenizer, Path(args.output))
        leave_together()
        status = "FINISHED"
    finally:
        if close_run:
            close_run(run_id, status)
    return 0


def leave_together() -> None:
    """Every rank waits for the others, then closes the process group: a rank that exits while
    another still writes the outputs or tears down gloo can abort the other one (SIGABRT)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


# ---------------------------------------------------------------------------- used by the node


def launch_subprocess(
    examples: ExampleShards,
    tokenizer: Tokenizer,
    params: dict[str, Any],
    nproc_per_node: int,
    *,
    mlflow_run_id: str | None = None,
    mlflow_tracking_uri: str | None = None,
) -> tuple[Any, pd.DataFrame, dict[str, Any]]:
    """Runs the entry point under torchrun on this machine; returns (model, history, metrics).

    The tokenizer and parameters go to a temporary folder, the processes map the examples' own
    shard files; they never import or re-run Kedro.
    """
    workdir = Path(tempfile.mkdtemp(prefix="bert_pretrain_"))
    try:
        save_tokenizer(tokenizer, workdir / "tokenizer")
        (workdir / "params.json").write_text(json.dumps(params), encoding="utf-8")
        output = workdir / "output"
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
            f"--nproc_per_node={nproc_per_node}", "-m", "bert_pipeline.training.launch",
            "--examples", str(examples.paths()[0].parent),
            "--tokenizer", str(workdir / "tokenizer"),
            "--config", str(workdir / "params.json"),
            "--output", str(output),
        ]  # fmt: skip
        env = dict(os.environ)
        for key, value in (
            ("MLFLOW_RUN_ID", mlflow_run_id),
            ("MLFLOW_TRACKING_URI", mlflow_tracking_uri),
        ):
            if value:
                env[key] = value
            else:
                env.pop(key, None)
        logger.info("launching %d training processes: %s", nproc_per_node, " ".join(command))
        completed = subprocess.run(command, env=env, check=False)
        if completed.returncode != 0 or not (output / METRICS_FILE).is_file():
            raise RuntimeError(
                f"distributed training failed (torchrun exit code {completed.returncode}); see the "
                "worker logs above"
            )
        model = load_pretrained(output / MODEL_DIR)
        history = pd.read_parquet(output / HISTORY_FILE)
        metrics = json.loads((output / METRICS_FILE).read_text(encoding="utf-8"))
        return model, history, metrics
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
