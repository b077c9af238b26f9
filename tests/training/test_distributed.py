"""Two-process DDP (gloo, CPU) through the entry point the Kedro node uses for several devices."""

from __future__ import annotations

import json
import subprocess
import sys

import mlflow
import pytest
import torch

from bert_pipeline.data.tokenizer import save_tokenizer
from bert_pipeline.training.launch import launch_subprocess


def test_two_process_ddp_keeps_ranks_in_sync_and_logs_one_run(
    tmp_path, mlflow_uri, tiny_tokenizer, tiny_shards
):
    params = {
        "model": {"preset": "tiny", "overrides": {"hidden_size": 32, "intermediate_size": 64}},
        "schedule": {"warmup_steps": 1, "max_steps": 4},
        "batch_size": 4,
        "val_split": 0.2,
        "val_every_n_steps": 2,
        "log_every_n_steps": 1,
        "checkpoint_every_n_steps": 2,
        "checkpoint_dir": str(tmp_path / "ckpt"),
        "progress_bar": False,
        "accelerator": "cpu",
        "devices": 2,
        "strategy": "ddp",
    }
    mlflow.set_tracking_uri(mlflow_uri)
    experiment = mlflow.set_experiment("ddp_test")
    run = mlflow.MlflowClient().create_run(experiment.experiment_id)

    model, history, metrics = launch_subprocess(
        tiny_shards, tiny_tokenizer, params, 2,
        mlflow_run_id=run.info.run_id, mlflow_tracking_uri=mlflow_uri,
    )  # fmt: skip

    assert metrics["world_size"] == 2 and metrics["global_step"] == 4
    digests = metrics["rank_parameter_digests"]
    assert len(digests) == 2 and digests[0] == digests[1], "DDP replicas diverged"
    assert isinstance(model, torch.nn.Module)
    assert {"train/loss", "val/mlm_loss", "train/tokens_per_sec"} <= set(history["metric"])

    client = mlflow.MlflowClient()
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == [run.info.run_id]  # no run per rank
    logged = client.get_run(run.info.run_id)
    assert {"train/loss", "val/mlm_loss", "val/nsp_accuracy"} <= set(logged.data.metrics)
    assert logged.info.status == "RUNNING"  # Lightning did not end the caller's run
    assert len(client.get_metric_history(run.info.run_id, "train/loss")) == 4


def test_entry_point_without_kedro_opens_and_closes_its_own_run(
    tmp_path, mlflow_uri, tiny_tokenizer, tiny_shards
):
    from bert_pipeline.training.launch import main

    save_tokenizer(tiny_tokenizer, tmp_path / "tok")
    params = {
        "pretrain_model": {
            "model": {"overrides": {"hidden_size": 32, "intermediate_size": 64}},
            "schedule": {"warmup_steps": 1, "max_steps": 2},
            "batch_size": 8,
            "checkpoint_dir": str(tmp_path / "ckpt"),
            "progress_bar": False,
            "accelerator": "cpu",
        }
    }
    (tmp_path / "params.json").write_text(json.dumps(params))
    argv = ["--examples", str(tiny_shards.paths()[0].parent), "--tokenizer", str(tmp_path / "tok"),
            "--config", str(tmp_path / "params.json"), "--output", str(tmp_path / "out"),
            "--mlflow-tracking-uri", mlflow_uri, "--mlflow-experiment", "standalone"]  # fmt: skip
    assert main(argv) == 0

    assert {"config.json", "model.safetensors", "vocab.txt"} <= {
        p.name for p in (tmp_path / "out" / "model").iterdir()
    }
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["global_step"] == 2
    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("standalone").experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["optimizer.lr"] == "0.001" and "val/mlm_loss" in run.data.metrics


def test_readme_torchrun_command_with_the_shipped_parameters_file(
    tmp_path, project_root, tiny_tokenizer, tiny_shards
):
    """The multi-node command of docs/training.md, on one node, 2 gloo processes, a few steps:
    the world is torchrun's (the shipped file says `devices: 1`), a `--set` against it refused."""
    save_tokenizer(tiny_tokenizer, tmp_path / "tok")

    def torchrun(*overrides: str) -> subprocess.CompletedProcess:
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "-m", "bert_pipeline.training.launch",
            "--examples", str(tiny_shards.paths()[0].parent), "--tokenizer", str(tmp_path / "tok"),
            "--config", "conf/base/parameters_pretrain_model.yml",
            "--output", str(tmp_path / "out"),
            "--set", "schedule.max_steps=3", "schedule.warmup_steps=1", "batch_size=4",
            "accelerator=cpu", "progress_bar=false", f"checkpoint_dir={tmp_path / 'ckpt'}",
            *overrides,
        ]  # fmt: skip
        return subprocess.run(
            command, cwd=project_root, capture_output=True, text=True, check=False
        )

    done = torchrun()
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["global_step"] == 3
    assert len(metrics["rank_parameter_digests"]) == 2

    refused = torchrun("devices=4")
    assert refused.returncode != 0
    assert (
        "bert_pipeline.training.launch: error: --set devices=4 disagrees with torchrun's "
        "--nproc_per_node=2; set devices=2 or leave it out (the launcher takes it from torchrun)"
    ) in refused.stderr
    assert "bert_pipeline/training" not in refused.stderr  # no traceback of ours (torchrun's own)


def test_launcher_takes_the_world_from_torchruns_environment(monkeypatch):
    """Two nodes of 4 processes: the file's devices/num_nodes give way, a --set is checked."""
    from bert_pipeline.training.launch import torchrun_world

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("WORLD_SIZE", "8")
    file = {"devices": 1, "num_nodes": 1, "batch_size": 32}
    assert torchrun_world(file, []) == {"devices": 4, "num_nodes": 2, "batch_size": 32}
    assert torchrun_world({**file, "devices": 4}, ["devices=4"])["num_nodes"] == 2
    with pytest.raises(ValueError, match=r"^--set num_nodes=1 disagrees with torchrun's 2 node"):
        torchrun_world(file, ["num_nodes=1"])
    monkeypatch.delenv("LOCAL_WORLD_SIZE")  # not under torchrun: the parameters as they are
    assert torchrun_world(file, []) == file


def test_the_training_entry_point_imports_without_mlflow():
    """A GPU node may have torch and lightning but no MLflow: the launcher and the fine-tuning
    cores need it only for a tracked run (benchmarks/cuda_check.py runs them so)."""
    script = (
        "import sys\n"
        "sys.modules['mlflow'] = None  # any import of it fails\n"
        "import bert_pipeline.training.launch, bert_pipeline.glue.finetune\n"
        "import bert_pipeline.swag.finetune\n"
        "print('imported')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr[-2000:]
