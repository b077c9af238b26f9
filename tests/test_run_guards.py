"""A run completes consistently or refuses at once: locks, checkpoint ownership, early errors."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from bert_pipeline.model.checkpoint import write_checkpoint
from bert_pipeline.runlock import FolderInUseError, RunLock
from tests.glue.helpers import tiny_checkpoint, write_glue_tsv
from tests.pipelines.test_pretrain_model import TINY_RUN


def _hold_lock(folder: Path) -> subprocess.Popen:
    """Another process that owns `folder` until killed."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from bert_pipeline.runlock import RunLock\n"
            f"RunLock({str(folder)!r}, 'data_dir').acquire()\n"
            "print('locked', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_second_run_is_refused_and_a_killed_runs_lock_is_taken_over(tmp_path):
    holder = _hold_lock(tmp_path)
    try:
        with pytest.raises(
            FolderInUseError, match=rf"data_dir {tmp_path} is in use .*pid {holder.pid}"
        ):
            RunLock(tmp_path, "data_dir").acquire()
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path, "data_dir"):  # the dead owner's lock is stale: taken over
        pass


def _session(project_root: Path, runtime: dict, **kwargs) -> KedroSession:
    bootstrap_project(project_root)
    return KedroSession.create(project_path=project_root, runtime_params=runtime, **kwargs)


def test_kedro_run_into_a_data_dir_in_use_is_refused_before_any_node(
    tmp_path, project_root, mlflow_uri
):
    data_dir = tmp_path / "data"
    holder = _hold_lock(data_dir)
    try:
        with _session(project_root, {"data_dir": str(data_dir), **TINY_RUN}) as session:
            with pytest.raises(FolderInUseError, match="in use by another run"):
                session.run(pipeline_names=["pretrain_data"])
    finally:
        holder.kill()
        holder.wait()
    assert [p.name for p in data_dir.iterdir()] == [".run.lock"]  # nothing written


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"pretrain_data": {"examples": {"masked_lm_prob": 1.5}}}, "examples.masked_lm_prob=1.5"),
        ({"pretrain_data": {"examples": {"max_seq_length": 4}}}, "examples.max_seq_length=4"),
        ({"pretrain_data": {"examples": {"max_seq_length": 5}}}, "examples.max_seq_length=5"),
        ({"pretrain_model": {"optimizer": {"lr": -1}}}, "pretrain_model.optimizer.lr=-1.0 must"),
        ({"pretrain_model": {"model": {"preset": "huge"}}}, "pretrain_model.model.preset='huge'"),
        ({"pretrain_model": {"model": {"overrides": {"hiden_size": 64}}}}, "model.overrides="),
        ({"pretrain_data": {"dask": {"n_workers": "abc"}}}, r"pretrain_data.dask.n_workers: "),
        ({"pretrain_data": {"dask": {"memory_limit": "lots"}}}, "dask.memory_limit='lots' must"),
    ],
)
def test_bad_parameters_stop_the_run_before_the_first_node(
    tmp_path, project_root, mlflow_uri, params, message
):
    """Refused before the first node loads its inputs: the corpus path does not even exist."""
    corpus = {"corpus": {"path": str(tmp_path / "no_corpus")}}
    runtime = {"data_dir": str(tmp_path / "data"), **corpus, **params}
    with _session(project_root, runtime) as session:
        with pytest.raises(ValueError, match=message):
            session.run(pipeline_names=["pretrain"])
    assert [p.name for p in (tmp_path / "data").iterdir()] == [".run.lock"]


def test_from_nodes_without_the_earlier_outputs_is_refused_before_any_node(
    tmp_path, project_root, mlflow_uri
):
    with _session(project_root, {"data_dir": str(tmp_path / "data")}) as session:
        with pytest.raises(
            FileNotFoundError, match=r"read pretrain_corpus_warnings \(.*\), pretrain_s"
        ):
            session.run(
                pipeline_names=["pretrain_data"], from_nodes=["pretrain_data.build_tokenizer"]
            )
    assert [p.name for p in (tmp_path / "data").iterdir()] == [".run.lock"]


def test_missing_glue_model_is_named_before_the_first_node(tmp_path, project_root, mlflow_uri):
    runtime = {"data_dir": str(tmp_path / "data"), "glue_model_dir": str(tmp_path / "none")}
    with _session(project_root, runtime) as session:
        with pytest.raises(FileNotFoundError, match=r"glue_pretrained_model \(.*none\) does not"):
            session.run(pipeline_names=["finetune_glue"])
    assert [p.name for p in (tmp_path / "data").iterdir()] == [".run.lock"]


def test_damaged_glue_model_is_named_before_the_first_node(tmp_path, project_root, mlflow_uri):
    model = write_checkpoint(tiny_checkpoint(), tmp_path / "model")
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    runtime = {"data_dir": str(tmp_path / "data"), "glue_model_dir": str(model)}
    with _session(project_root, runtime) as session:
        with pytest.raises(ValueError, match=r"glue_model_dir\): .*model.safetensors is not a"):
            session.run(pipeline_names=["finetune_glue"])
    assert [p.name for p in (tmp_path / "data").iterdir()] == [".run.lock"]


def test_glue_tasks_come_from_the_env_of_the_run(tmp_path, project_root, mlflow_uri, monkeypatch):
    conf = tmp_path / "conf"
    shutil.copytree(project_root / "conf" / "base", conf / "base")
    (conf / "local").mkdir()
    (conf / "myenv").mkdir()
    (conf / "myenv" / "parameters_finetune_glue.yml").write_text(
        yaml.safe_dump({"finetune_glue": {"tasks": ["rte"]}})
    )
    monkeypatch.setenv("KEDRO_ENV", "myenv")  # as `kedro run --env myenv` names it
    monkeypatch.chdir(tmp_path)  # the project's conf folder: ./conf
    runtime = {
        "data_dir": str(tmp_path / "data"),
        "glue_raw_dir": str(write_glue_tsv(tmp_path / "glue", tasks=["rte"])),
        "glue_model_dir": str(write_checkpoint(tiny_checkpoint(), tmp_path / "model")),
        "finetune_glue": {
            "data": {"max_train_examples": 8},
            "defaults": {"epochs": 1, "batch_size": 8, "max_seq_length": 32},
        },
    }
    with _session(project_root, runtime, conf_source=str(conf), env="myenv") as session:
        session.run(pipeline_names=["finetune_glue"])
    assert [p.name for p in (tmp_path / "data" / "06_models" / "glue").iterdir()] == ["rte"]


def test_two_runs_create_the_tracking_store_together(tmp_path, project_root):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    start = time.time() + 3  # both processes pass the barrier at the same moment
    script = (
        "import time\n"
        "from bert_pipeline.hooks.tracking import create_tracking_store\n"
        f"time.sleep(max(0, {start} - time.time()))\n"
        f"create_tracking_store({uri!r})\n"
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    errors = [run.communicate()[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], errors


def test_a_killed_runs_mlflow_run_is_marked_killed_by_the_next_run(tmp_path, mlflow_uri):
    import mlflow

    from bert_pipeline.hooks.tracking import HOST_TAG, PID_TAG, mark_killed_runs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs
    client = mlflow.MlflowClient()
    experiment = client.create_experiment("guards")
    killed = client.create_run(
        experiment, tags={PID_TAG: str(dead.pid), HOST_TAG: socket.gethostname()}
    )
    child = client.create_run(experiment, tags={"mlflow.parentRunId": killed.info.run_id})
    live = client.create_run(
        experiment, tags={PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    )
    with mlflow.start_run(experiment_id=experiment) as current:
        mark_killed_runs()
    assert client.get_run(current.info.run_id).data.tags[PID_TAG] == str(os.getpid())
    status = [client.get_run(r.info.run_id).info.status for r in (killed, child, live)]
    assert status == ["KILLED", "KILLED", "RUNNING"]


def test_a_failed_run_says_what_is_wrong_in_a_few_lines(tmp_path, project_root):
    """No startup warnings, no chained tracebacks: the reason, and where the traceback went."""
    shutil.copy(project_root / "pyproject.toml", tmp_path)
    shutil.copytree(project_root / "conf", tmp_path / "conf")
    (tmp_path / "src").mkdir()  # the package itself is installed (editable)
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "KEDRO_DISABLE_TELEMETRY": "true",
    }
    command = [
        str(Path(sys.executable).parent / "kedro"), "run", "--pipeline", "pretrain",
        "--params", f"data_dir={tmp_path / 'data'},pretrain_data.examples.masked_lm_prob=1.5",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    output = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 1
    assert len(output) <= 12, "\n".join(output)
    assert output[-2] == (
        "Error: ConfigError: parameter pretrain_data.examples.masked_lm_prob=1.5 must be in (0, 1)"
    )
    assert "Traceback" in (tmp_path / "logs" / "last_error.log").read_text()
    assert not any("Warning" in line for line in output)
    # refused before Kedro's session: no MLflow store, no run folder, no lock
    assert not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path / "data").exists()
