"""The README's commands, run as a new user runs them (the CLI, in a subprocess), on tiny data.

One tiny `kedro run --pipeline pretrain` is shared: `resume=true` continues it and the MLflow
UI server answers for it. `--namespaces=rte` and `kedro viz build` run on their own.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bert_pipeline.model.checkpoint import write_checkpoint
from bert_pipeline.model.config import PRESETS
from tests.data.conftest import TOPICS, write_wikiextractor
from tests.glue.helpers import tiny_checkpoint, write_glue_tsv
from tests.mlflow_store import DATABASE, new_store

BIN = Path(sys.executable).parent
SWAG_SAMPLE = "data/01_raw/swag_sample/sample.jsonl"
TINY_PRETRAIN = {
    "corpus.max_documents": 40,
    "pretrain_data.tokenizer.vocab_size": 800,
    "pretrain_data.examples.dupe_factor": 1,
    "pretrain_data.examples.max_seq_length": 64,
    "pretrain_model.model.overrides.hidden_size": 32,
    "pretrain_model.model.overrides.intermediate_size": 64,
    "pretrain_model.schedule.warmup_steps": 2,
    "pretrain_model.schedule.max_steps": 6,
    "pretrain_model.batch_size": 8,
    "pretrain_model.val_every_n_steps": 3,
    "pretrain_model.log_every_n_steps": 2,
    "pretrain_model.checkpoint_every_n_steps": 3,
    "pretrain_model.progress_bar": "false",
    "pretrain_model.accelerator": "cpu",
}

# The tests of one module fixture run on one xdist worker (`--dist loadgroup`), which builds the
# fixture once instead of once per worker.
ON_PRETRAINED = pytest.mark.xdist_group("readme_pretrained")
ON_VIZ_SITE = pytest.mark.xdist_group("readme_viz_site")


def _env(root: Path, first_run: bool = False) -> dict[str, str]:
    """`first_run`: the tracking store is made by the command, as on a user's first run."""
    env = dict(os.environ)
    env.update(
        MLFLOW_TRACKING_URI=f"sqlite:///{root / DATABASE}" if first_run else new_store(root),
        MLFLOW_ARTIFACT_LOCATION=(root / "mlartifacts").as_uri(),
        KEDRO_DISABLE_TELEMETRY="true",
        DO_NOT_TRACK="1",
        MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL="1",  # tiny runs last seconds, not minutes
    )
    return env


def _kedro(args: list[str], cwd: Path, env: dict[str, str], params: dict) -> str:
    command = [str(BIN / "kedro"), *args]
    if params:
        command += ["--params", ",".join(f"{k}={v}" for k, v in params.items())]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{output[-3000:]}"
    return output


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, project_root):
    """`kedro run --pipeline pretrain` on tiny settings; returns (root, env, params)."""
    root = tmp_path_factory.mktemp("readme")
    env = _env(root, first_run=True)
    env.pop("OMP_NUM_THREADS", None)  # torch's own choice, as a user runs it (the threads test)
    params = {"data_dir": root / "data", **TINY_PRETRAIN}
    output = _kedro(["run", "--pipeline", "pretrain"], project_root, env, params)
    (root / "console.txt").write_text(output)
    return root, env, params


@ON_PRETRAINED
def test_console_carries_no_third_party_noise(pretrained):
    """Kedro's progress and the project's own lines; no advertisements, warnings or doubles."""
    output = (pretrained[0] / "console.txt").read_text()
    assert "Pipeline execution completed" in output
    for noise in ("Tip:", "litlogger", "Warning:", "Downloading artifacts", "INFO: ", "Traceback"):
        assert noise not in output, noise
    assert output.count("Seed set to 42") == 1


@ON_PRETRAINED
def test_console_is_a_line_per_node_start_and_finish_and_a_summary(pretrained):
    """No dataset lines; each node's start and finish (with its time) once; the summary names
    the headline metric, the output folder and the MLflow run; a few dozen lines in all."""
    from bert_pipeline.pipeline_registry import register_pipelines

    root = pretrained[0]
    output = (root / "console.txt").read_text()
    assert "Loading data from" not in output and "Saving data to" not in output
    nodes = [n.name for n in register_pipelines()["pretrain"].nodes]
    for name in nodes:
        assert len(re.findall(rf"node \d+/{len(nodes)} {name} started\n", output)) == 1, name
        assert len(re.findall(rf"node \d+/{len(nodes)} {name} done in [\d.]+ s\n", output)) == 1
    summary = output[output.index("Pipeline execution completed in") :]
    assert "Result: val/mlm_accuracy = " in summary
    assert "Made (models): 06_models/bert_pretrained" in summary
    assert f"Output folder: {root / 'data'}" in summary
    assert re.search(r"MLflow run [0-9a-f]{32} in sqlite:///", summary)
    assert "make mlflow-ui" in summary
    lines = [line for line in output.splitlines() if line.strip()]
    assert len([line for line in lines if "% Completed |" not in line]) <= 60  # Dask's bars


@ON_PRETRAINED
def test_training_keeps_every_thread_after_the_dask_stages(pretrained):
    """The data stages' Dask nannies give their workers OMP_NUM_THREADS=1; the training node of
    the same run still has the threads torch takes in a new process (every core here)."""
    import mlflow

    root, env, _ = pretrained
    probe = "import torch; print(torch.get_num_threads())"
    fresh = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    run_id = re.search(r"MLflow run ([0-9a-f]{32})", (root / "console.txt").read_text())[1]
    run = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"]).get_run(run_id)
    assert run.data.params["pretrain_model.torch_threads"] == fresh.stdout.strip()


@ON_PRETRAINED
def test_resume_true_continues_the_run(pretrained, project_root):
    root, env, params = pretrained
    more = {**params, "pretrain_model.resume": "true", "pretrain_model.schedule.max_steps": 9}
    output = _kedro(["run", "--pipeline", "pretrain_model"], project_root, env, more)
    assert "resuming from" in output
    metrics = json.loads((root / "data" / "08_reporting" / "pretrain_metrics.json").read_text())
    assert metrics["global_step"] == 9


def _free_port() -> int:
    """A port nobody listens on, below 49152 (kedro-viz refuses the ephemeral range)."""
    for port in random.Random().sample(range(20000, 49000), 200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise AssertionError("no free port")


def _get(url: str, parse=json.loads):
    with urllib.request.urlopen(url, timeout=5) as response:
        return parse(response.read())


def _post(url: str, body: dict) -> dict:
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _serve(command, path: str, cwd: Path, env: dict[str, str], parse=json.loads):
    """Starts `command(port)` in its own process group; returns (process, base URL, first answer
    of base URL + path). A port taken between the choice and the bind (by a parallel test's Dask
    worker, say) is retried on another port."""
    for _ in range(5):
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        with (cwd / "server.log").open("w") as log:
            server = subprocess.Popen(
                command(port),
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 90
        while server.poll() is None and time.monotonic() < deadline:
            announced = re.findall(r"http://127\.0\.0\.1:\d+", (cwd / "server.log").read_text())
            base = announced[-1] if announced else base  # kedro viz moves to a free port itself
            try:
                return server, base, _get(base + path, parse)
            except (OSError, http.client.HTTPException):  # not up yet, or another's port
                time.sleep(1)
        _stop(server)
        output = (cwd / "server.log").read_text()
        if "already in use" not in output:
            raise AssertionError(
                f"{command(port)[:3]} did not answer at {base + path}:\n{output[-2000:]}"
            )
    raise AssertionError(f"{command(port)[:3]}: five ports were taken:\n{output[-2000:]}")


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=30)


@ON_PRETRAINED
def test_mlflow_ui_serves_the_finished_run(pretrained):
    root, env, _ = pretrained
    ui = [str(BIN / "mlflow"), "ui", "--backend-store-uri", env["MLFLOW_TRACKING_URI"]]
    server, url, experiment = _serve(  # as `make mlflow-ui` starts it
        lambda port: [*ui, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        "/api/2.0/mlflow/experiments/get-by-name?experiment_name=bert_pipeline",
        root,
        {**env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    base = f"{url}/api/2.0/mlflow"
    try:
        experiment_id = experiment["experiment"]["experiment_id"]
        runs = _post(f"{base}/runs/search", {"experiment_ids": [experiment_id]})["runs"]
        finished = [r for r in runs if r["info"]["status"] == "FINISHED"]
        assert finished, [r["info"]["status"] for r in runs]
        metrics = {m["key"] for r in finished for m in r["data"].get("metrics", [])}
        assert {"val/mlm_loss", "train/loss"} <= metrics
        assert any(key.startswith("system/cpu_utilization") for key in metrics)
        inputs = [i["dataset"]["name"] for r in finished for i in r["inputs"]["dataset_inputs"]]
        assert "pretraining_examples" in inputs
        models = _post(f"{base}/logged-models/search", {"experiment_ids": [experiment_id]})
        sources = {m["info"]["source_run_id"] for m in models["models"]}
        pretraining = {
            r["info"]["run_id"] for r in finished if "val/mlm_loss" in str(r["data"]["metrics"])
        }
        assert pretraining and pretraining <= sources
    finally:
        _stop(server)


@ON_PRETRAINED
def test_mlflow_models_serve_answers_over_http(pretrained):
    """`make serve MODEL=models:/bert-pretrained@best`'s `mlflow models serve`, on localhost."""
    root, env, _ = pretrained
    command = [str(BIN / "mlflow"), "models", "serve", "-m", "models:/bert-pretrained@best"]
    command += ["--env-manager", "local", "--host", "127.0.0.1", "--port"]
    env = {**env, "PATH": f"{BIN}{os.pathsep}{env['PATH']}"}  # its uvicorn, as make serve
    server, url, _ = _serve(lambda port: [*command, str(port)], "/ping", root, env, parse=bytes)
    try:
        rows = [["A short sentence.", None], ["A first segment.", "And a second one."]]
        body = {"dataframe_split": {"columns": ["text_a", "text_b"], "data": rows}}
        answer = _post(f"{url}/invocations", body)["predictions"]
        assert len(answer) == 2
        hidden = TINY_PRETRAIN["pretrain_model.model.overrides.hidden_size"]
        assert all(len(row["cls_embedding"]) == hidden for row in answer)
        assert answer[0]["mean_embedding"] != answer[1]["mean_embedding"]
    finally:
        _stop(server)


@pytest.mark.parametrize("env", ["base", "budget"])
def test_namespaces_runs_one_glue_task(tmp_path, project_root, env):
    """`--namespaces=rte`, and the budget environment's fine-tuning (its grid, [CLS] head) as the
    README's comparison with BERT-Tiny runs it: chosen on a train hold-out, then refit on all of
    train, from a random init."""
    raw = write_glue_tsv(tmp_path / "glue_data", tasks=["rte"])
    model = write_checkpoint(tiny_checkpoint(), tmp_path / "pretrained")
    params = {
        "data_dir": tmp_path / "data",
        "glue_raw_dir": raw,
        "glue_model_dir": model,
        "finetune_glue.data.max_train_examples": 12,
        "finetune_glue.defaults.epochs": 1,
        "finetune_glue.defaults.batch_size": 8,
        "finetune_glue.defaults.max_seq_length": 32,
        "finetune_glue.defaults.progress_bar": "false",
    }
    if env == "budget":
        params["finetune_glue.defaults.selection_holdout"] = 0.5
        params["finetune_glue.defaults.refit"] = "true"
        params["finetune_glue.defaults.random_init_seed"] = 0
        params["finetune_glue.hyperparameters.rte.epochs"] = 2  # as the README's sst2 epochs=3
    args = ["run", "--env", env, "--pipeline", "finetune_glue", "--namespaces=rte"]
    _kedro(args, project_root, _env(tmp_path), params)
    assert sorted(p.name for p in (tmp_path / "data" / "06_models" / "glue").iterdir()) == ["rte"]
    record = tmp_path / "data" / "08_reporting" / "glue" / "rte" / "dev_metrics.json"
    metrics = json.loads(record.read_text())
    assert metrics["task"] == "rte" and metrics["train_examples"] == 12
    config = json.loads(
        (tmp_path / "data" / "06_models" / "glue" / "rte" / "config.json").read_text()
    )
    assert config.get("classifier_pooling", "cls") == "cls"
    assert len(metrics["trials"]) == (18 if env == "budget" else 1)  # lr x seed x dropout
    assert {len(t["history"]) for t in metrics["trials"]} == {2 if env == "budget" else 1}
    if env == "budget":
        assert "train_holdout" in metrics["selected_on"]
        assert len(metrics["refits"]) == 3 and metrics["trained_on"] == 12
        card = (tmp_path / "data" / "06_models" / "glue" / "rte" / "README.md").read_text()
        assert "a random init (seed 0) of" in card
        assert "seeds on a held-out slice of train (18 trials)" in card
        assert f"dropout {metrics['best']['dropout']:g}: the best mean score" in card
        assert "trained again on all 12 training examples" in card


def test_ner_commands_run_on_the_bundled_sample(tmp_path, project_root):
    """`finetune_ner`, `finetune_ner_features` and a tagger-only rerun from the cached features."""
    model = write_checkpoint(tiny_checkpoint(), tmp_path / "pretrained")
    env = _env(tmp_path)
    params = {
        "data_dir": tmp_path / "data",
        "ner_model_dir": model,
        "finetune_ner.finetune.epochs": 1,
        "finetune_ner.finetune.max_seq_length": 48,
        "finetune_ner.finetune.progress_bar": "false",
        "finetune_ner.feature_based.epochs": 1,
        "finetune_ner.feature_based.lstm_width": 8,
        "finetune_ner.feature_based.max_seq_length": 48,
        "finetune_ner.feature_based.progress_bar": "false",
    }
    _kedro(["run", "--pipeline", "finetune_ner"], project_root, env, params)
    _kedro(["run", "--pipeline", "finetune_ner_features"], project_root, env, params)
    cache = tmp_path / "data" / "05_model_input" / "ner_features" / "tensors.safetensors"
    made = cache.stat().st_mtime_ns
    params["finetune_ner.feature_based.lstm_width"] = 4
    args = [
        "run",
        "--pipeline",
        "finetune_ner_features",
        "--from-nodes",
        "train_ner_feature_tagger",
    ]
    output = _kedro(args, project_root, env, params)
    assert "extract_ner_features" not in output and cache.stat().st_mtime_ns == made
    tagger = json.loads(
        (tmp_path / "data" / "06_models" / "ner_feature_tagger" / "config.json").read_text()
    )
    assert tagger["width"] == 4
    for mode in ("finetune", "feature_based"):
        record = tmp_path / "data" / "08_reporting" / "ner" / f"{mode}_metrics.json"
        assert 0 <= json.loads(record.read_text())["dev_metrics"]["f1"] <= 1


def test_squad_command_runs_on_the_bundled_sample(tmp_path, project_root):
    model = write_checkpoint(tiny_checkpoint(), tmp_path / "pretrained")
    params = {
        "data_dir": tmp_path / "data",
        "squad_model_dir": model,
        "finetune_squad.data.max_train_questions": 40,
        "finetune_squad.training.epochs": 1,
        "finetune_squad.training.max_seq_length": 64,
        "finetune_squad.training.doc_stride": 16,
        "finetune_squad.training.progress_bar": "false",
    }
    _kedro(["run", "--pipeline", "finetune_squad"], project_root, _env(tmp_path), params)
    record = json.loads((tmp_path / "data" / "08_reporting" / "squad_metrics.json").read_text())
    assert record["version"] == "1.1" and record["train_questions"] == 40
    assert record["dev_questions"] == 120  # the bundled sample's dev set


@pytest.fixture(scope="module")
def viz_site(tmp_path_factory, project_root) -> Path:
    """`kedro viz build` in a copy of the project's layout (build/ stays out of the checkout)."""
    root = tmp_path_factory.mktemp("viz")
    shutil.copy(project_root / "pyproject.toml", root)
    shutil.copytree(project_root / "conf", root / "conf")
    (root / "src").mkdir()  # the package itself is installed (editable)
    _kedro(["viz", "build"], root, _env(root), {})
    return root / "build"


@ON_VIZ_SITE
def test_kedro_viz_build_writes_the_site(viz_site):
    assert (viz_site / "index.html").is_file()
    main = json.loads((viz_site / "api" / "main").read_text())
    assert {"pretrain", "pretrain_data", "pretrain_model", "finetune_glue"} <= {
        p["id"] for p in main["pipelines"]
    }
    assert any(n["name"].endswith("train_bert") or "pretrain" in n["name"] for n in main["nodes"])


KEDRO_LAYERS = ["raw", "intermediate", "primary", "feature", "model_input", "models"]
KEDRO_LAYERS += ["model_output", "reporting"]


@ON_VIZ_SITE
def test_kedro_viz_shows_every_pipeline_in_kedro_layers(viz_site):
    """kedro-viz sends no layers (and draws none) for a pipeline whose layers form a cycle."""
    main = json.loads((viz_site / "api" / "main").read_text())
    for pipeline in main["pipelines"]:
        view = json.loads((viz_site / "api" / "pipelines" / pipeline["id"]).read_text())
        used = {n["layer"] for n in view["nodes"] if n.get("layer")}
        assert used <= set(KEDRO_LAYERS), (pipeline["id"], used)
        shown = [layer for layer in view["layers"] if layer in used]
        assert shown == sorted(used, key=KEDRO_LAYERS.index), (pipeline["id"], view["layers"])


@ON_VIZ_SITE
def test_kedro_viz_collapses_the_halves_of_pretrain(viz_site):
    view = json.loads((viz_site / "api" / "pipelines" / "pretrain").read_text())
    assert {"pretrain_data", "pretrain_model"} <= set(view["modular_pipelines"])
    tasks = {n["name"]: n["modular_pipelines"] for n in view["nodes"] if n["type"] == "task"}
    assert tasks["build_tokenizer"] == ["pretrain_data"]
    assert tasks["pretrain_bert"] == ["pretrain_model"]
    assert set(map(tuple, tasks.values())) == {("pretrain_data",), ("pretrain_model",)}


def test_kedro_viz_run_serves_the_pipelines(tmp_path, project_root):
    """`make viz`: the kedro-viz server answers with the project's pipelines."""
    shutil.copy(project_root / "pyproject.toml", tmp_path)
    shutil.copytree(project_root / "conf", tmp_path / "conf")
    (tmp_path / "src").mkdir()
    command = [str(BIN / "kedro"), "viz", "run", "--no-browser", "--host", "127.0.0.1", "--port"]
    server, _, main = _serve(
        lambda port: [*command, str(port)], "/api/main", tmp_path, _env(tmp_path)
    )
    try:
        assert {"pretrain", "finetune_glue"} <= {p["id"] for p in main["pipelines"]}
    finally:
        _stop(server)


def test_no_nsp_ablation_runs_end_to_end(tmp_path, project_root):
    params = {"data_dir": tmp_path / "data", **TINY_PRETRAIN}
    params["pretrain_data.examples.next_sentence"] = "false"
    _kedro(["run", "--pipeline", "pretrain"], project_root, _env(tmp_path), params)
    reports = tmp_path / "data" / "08_reporting"
    assert json.loads((reports / "pretrain_data_statistics.json").read_text())["is_next_rate"] == 1
    metrics = json.loads((reports / "pretrain_metrics.json").read_text())
    assert "val/mlm_accuracy" in metrics and "val/nsp_accuracy" not in metrics


# docs/training.md: the fp32 recipe, on top of the budget environment
FP32_RECIPE = {
    "pretrain_data.examples.masking": "static",
    "pretrain_model.precision": "32",
    "pretrain_model.compile": "false",
    "pretrain_model.dropout": "null",
}


@pytest.mark.parametrize("recipe", ["committed", "fp32"])
def test_budget_environment_pretrains_from_wikiextractor_files(tmp_path, project_root, recipe):
    """`make pretrain-budget` (`kedro run --env budget`) on 12 articles, with tiny sizes; and
    the fp32 recipe of docs/training.md (its batch and step counts stay tiny)."""
    names = ["AA/wiki_00", "AA/wiki_01", "AB/wiki_00"]
    wiki = write_wikiextractor(
        tmp_path / "wiki", {n: [f"{t} {k}" for t in TOPICS[:4]] for k, n in enumerate(names)}
    )
    params = {**TINY_PRETRAIN, "data_dir": tmp_path / "data", "corpus.path": wiki}
    del params["corpus.max_documents"]
    params["pretrain_model.val_split"] = 4
    if recipe == "fp32":
        params |= FP32_RECIPE
    else:  # the README's time budget (never reached by these few steps)
        params["pretrain_model.schedule.budget_minutes"] = 60
        # every batch as long as the longest example, as the hour's are: one compiled graph
        params["pretrain_model.pad_to_multiple_of"] = params[
            "pretrain_data.examples.max_seq_length"
        ]
    _kedro(["run", "--env", "budget"], project_root, _env(tmp_path), params)
    stats = json.loads(
        (tmp_path / "data" / "08_reporting" / "pretrain_data_statistics.json").read_text()
    )
    documents = pd.read_parquet(tmp_path / "data" / "02_intermediate" / "pretrain_documents")
    assert len(documents) == 12  # every article of the three files
    assert stats["is_next_rate"] < 1  # the budget pretrains MLM + NSP
    metrics = json.loads((tmp_path / "data" / "08_reporting" / "pretrain_metrics.json").read_text())
    assert "val/nsp_accuracy" in metrics
    export = tmp_path / "data" / "06_models" / "bert_pretrained"
    transformers = pytest.importorskip("transformers")
    model = transformers.BertModel.from_pretrained(export)
    conf = project_root / "conf" / "budget" / "parameters_pretrain_model.yml"
    budget = yaml.safe_load(conf.read_text())
    preset = budget["pretrain_model"]["model"]["preset"]
    assert model.config.num_hidden_layers == PRESETS[preset][0]
    assert model.config.vocab_size < 800  # the budget's own WordPiece vocabulary, trained here
    assert model.config.hidden_dropout_prob == 0.1  # the fine-tuning dropout in both
    card = (export / "README.md").read_text()
    if recipe == "committed":  # pretrained without dropout, exported with it for fine-tuning
        from bert_pipeline.training.hardware import choose

        chosen = choose("auto", "auto", "auto")  # what the recipe's auto means on this machine
        compiled = ", torch.compile" if chosen.compile else ""
        assert f"Precision {chosen.precision}{compiled}; dropout 0.0 while pretraining" in card
        assert "Masking: dynamic" in card
    else:
        assert "Precision 32; dropout 0.1." in card and "Masking: static" in card


@ON_PRETRAINED
def test_notebook_tours_a_pretrain_and_finetune_run(pretrained, project_root, monkeypatch):
    """notebooks/tour.ipynb as `make notebook` runs it: the project's kernel, started in
    notebooks/ of the project, with the project's defaults (no MLFLOW_TRACKING_URI); the tiny
    run plus GLUE are in the project's store (a copy of the project, as `make pretrain` and
    `make finetune` leave it)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    root, env, params = pretrained
    glue = {
        "data_dir": params["data_dir"],
        "finetune_glue.data.max_train_examples": 32,
        "finetune_glue.defaults.epochs": 1,
        "finetune_glue.defaults.max_seq_length": 32,
        "finetune_glue.defaults.progress_bar": "false",
    }
    _kedro(["run", "--pipeline", "finetune_glue"], project_root, env, glue)
    project = root / "project"
    for folder in ("conf", "notebooks"):
        shutil.copytree(project_root / folder, project / folder)
    shutil.copy(project_root / "pyproject.toml", project)
    (project / "src").mkdir()  # the package itself is installed (editable)
    shutil.copy(root / "mlflow.db", project / "mlflow.db")  # artifacts stay where they were logged
    for key in ("MLFLOW_TRACKING_URI", "MLFLOW_ARTIFACT_LOCATION"):
        monkeypatch.delenv(key, raising=False)  # the kernel inherits the environment
    for key in ("KEDRO_DISABLE_TELEMETRY", "DO_NOT_TRACK"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(root / "jupyter"))  # where the kernel goes
    monkeypatch.setenv("KEDRO_LOGGING_CONFIG", str(project / "conf" / "logging.yml"))  # Makefile
    _kedro(["jupyter", "setup"], project, dict(os.environ), {})  # as `kedro jupyter lab` does
    notebook = nbformat.read(project / "notebooks" / "tour.ipynb", as_version=4)
    assert notebook.metadata.kernelspec.name == "kedro_bert_pipeline"  # as `kedro jupyter` names it
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert not any(c.outputs or c.execution_count for c in code), "commit notebooks without outputs"
    assert 'data_dir = "data"' in code[0].source
    code[0].source = code[0].source.replace('"data"', repr(str(params["data_dir"])))
    client = nbclient.NotebookClient(
        notebook, timeout=300, resources={"metadata": {"path": str(project / "notebooks")}}
    )
    client.execute()
    texts = [
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
        for c in code
        for o in c.outputs
    ]
    everything = "\n".join(texts)
    assert "IsNext" in everything and "[MASK](" in everything  # decoded examples with their masks
    assert "GLUE average" in everything and "score" in everything  # summary, a classification
    assert "WARNING" not in everything and "Traceback" not in everything
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs)  # the plots
    loss_curves = next(c for c in code if "get_metric_history" in c.source)
    assert any("image/png" in o.get("data", {}) for o in loss_curves.outputs)
    assert not (project / "notebooks" / "mlflow.db").exists()  # the project's store, not a new one


def test_make_notebook_starts_jupyter_lab_with_the_kedro_kernel(tmp_path, project_root):
    """`make notebook`'s `kedro jupyter lab`: the server answers with the project's kernel."""
    pytest.importorskip("jupyterlab")
    command = [str(BIN / "kedro"), "jupyter", "lab", "--no-browser", "--ip", "127.0.0.1"]
    command += ["--IdentityProvider.token=", "--ServerApp.port_retries=0"]  # _serve retries
    command += ["--allow-root"] if os.geteuid() == 0 else []  # Jupyter refuses root otherwise
    server, _, specs = _serve(
        lambda port: [*command, "--port", str(port)],
        "/api/kernelspecs",
        project_root,
        _env(tmp_path),
    )
    try:
        assert specs["default"] == "kedro_bert_pipeline"
        assert "kedro_bert_pipeline" in specs["kernelspecs"]
    finally:
        _stop(server)


def test_swag_command_runs_on_the_bundled_sample(tmp_path, project_root):
    rows = [json.loads(line) for line in (project_root / SWAG_SAMPLE).read_text().splitlines()]
    texts = [v for r in rows for k, v in r.items() if k != "label"]
    model = write_checkpoint(tiny_checkpoint(texts), tmp_path / "pretrained")
    params = {
        "data_dir": tmp_path / "data",
        "swag_model_dir": model,
        "finetune_swag.training.epochs": 1,
        "finetune_swag.training.progress_bar": "false",
    }
    output = _kedro(["run", "--pipeline", "finetune_swag"], project_root, _env(tmp_path), params)
    assert "40 labelled examples measure nothing" in output
    record = json.loads((tmp_path / "data" / "08_reporting" / "swag_metrics.json").read_text())
    assert record["examples"] == {"train": 28, "dev": 12, "test": 0}
    dev = pd.read_csv(tmp_path / "data" / "07_model_output" / "swag" / "dev_predictions.csv")
    assert len(dev) == 12


def test_left_to_right_ablation_commands(tmp_path, project_root):
    """Table 5's LTR row as docs/training.md runs it: LTR & No NSP pretraining, then a GLUE
    task read from the last token, keeping the causal mask (BiLSTM heads: tests/glue, squad)."""
    env, data = _env(tmp_path), tmp_path / "data"
    params = {
        "data_dir": data,
        **TINY_PRETRAIN,
        "pretrain_data.examples.next_sentence": "false",
        "pretrain_model.objective": "ltr",
    }
    output = _kedro(["run", "--pipeline", "pretrain"], project_root, env, params)
    assert "Result: val/ltr_accuracy" in output
    model = data / "06_models" / "bert_pretrained"
    assert json.loads((model / "config.json").read_text())["is_decoder"] is True
    glue = {
        "data_dir": data,
        "glue_raw_dir": write_glue_tsv(tmp_path / "glue_data", tasks=["rte"]),
        "glue_model_dir": model,
        "finetune_glue.data.max_train_examples": 12,
        "finetune_glue.defaults.epochs": 1,
        "finetune_glue.defaults.max_seq_length": 32,
        "finetune_glue.defaults.classifier_pooling": "last",
        "finetune_glue.defaults.progress_bar": "false",
    }
    _kedro(["run", "--pipeline", "finetune_glue", "--namespaces=rte"], project_root, env, glue)
    config = json.loads((data / "06_models" / "glue" / "rte" / "config.json").read_text())
    assert config["is_decoder"] is True and config["classifier_pooling"] == "last"
