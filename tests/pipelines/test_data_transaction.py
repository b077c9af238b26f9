"""A `pretrain_data` run is one transaction, and its manifest is checked, not trusted.

The previous complete set (documents, sentences, tokenizer, examples, statistics) is made once;
each test copies it, then kills (SIGKILL, in a subprocess `kedro` session) or fails a data run
on another corpus at a moment of the issue, and trains on what is left: the tokenizer, the
examples and the statistics in the model card must still belong together.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from kedro.io import DatasetError

from bert_pipeline.data.shards import load_example_shards, tokenizer_fingerprint
from bert_pipeline.data.tokenizer import load_tokenizer
from bert_pipeline.io.example_shards_dataset import ExampleShardsDataset
from tests.data.conftest import TOPICS, prose_document, write_wikiextractor
from tests.mlflow_store import new_store
from tests.pipelines.test_pretrain_model import TINY_RUN

# One xdist worker (`--dist loadgroup`) runs this module, so the previous data set is built once.
pytestmark = pytest.mark.xdist_group("data_transaction")

SET = {
    "pretrain_documents": "02_intermediate/pretrain_documents",
    "pretrain_sentences": "03_primary/pretrain_sentences",
    "pretrain_corpus_warnings": "03_primary/pretrain_corpus_warnings.json",
    "tokenizer": "06_models/tokenizer",
    "pretraining_examples": "05_model_input/pretraining_examples",
    "pretrain_data_statistics": "08_reporting/pretrain_data_statistics.json",
}
EXAMPLES, STATISTICS = SET["pretraining_examples"], SET["pretrain_data_statistics"]
DATA_PARAMS = {
    "tokenizer": {"vocab_size": 200},
    "examples": {"max_seq_length": 64, "dupe_factor": 1, "documents_per_shard": 4},
    "dask": {"n_workers": 1},
}

# A kedro session in a subprocess; PAUSE, when set, stops it at a named function (after the
# function returned) and touches READY, so the test kills it at that very moment.
SESSION = textwrap.dedent(
    """
    import importlib, json, pathlib, sys, time
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    root, params, pipeline, pause, ready = sys.argv[1:6]
    if pause:
        module = importlib.import_module(pause.partition(":")[0])
        name = pause.partition(":")[2]
        real = getattr(module, name)

        def paused(*args, **kwargs):
            result = real(*args, **kwargs)
            pathlib.Path(ready).touch()
            time.sleep(600)
            return result

        setattr(module, name, paused)
    bootstrap_project(pathlib.Path(root))
    with KedroSession.create(project_path=root, runtime_params=json.loads(params)) as session:
        session.run(pipeline_names=[pipeline])
    """
)


def _params(data_dir: Path, corpus: Path, kind: str) -> dict:
    return {
        "data_dir": str(data_dir),
        "corpus": {"path": str(corpus), "kind": kind},
        "pretrain_data": DATA_PARAMS,
    }


def _session(
    project_root: Path, params: dict, pipeline: str, pause: str = "", ready: Path = Path()
):
    args = [project_root, json.dumps(params), pipeline, pause, ready]
    return subprocess.Popen([sys.executable, "-c", SESSION, *map(str, args)])


def _run(project_root: Path, params: dict, pipeline: str, **run_args) -> None:
    bootstrap_project(project_root)
    with KedroSession.create(project_path=project_root, runtime_params=params) as session:
        session.run(pipeline_names=[pipeline], **run_args)


def _digest(data_dir: Path) -> dict[str, str]:
    """sha256 of every file of the data set, by path."""
    files = []
    for relative in SET.values():
        path = data_dir / relative
        files += sorted(path.rglob("*")) if path.is_dir() else [path]
    return {
        str(f.relative_to(data_dir)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in files
        if f.is_file()
    }


@pytest.fixture(scope="module")
def previous_set(project_root: Path, tmp_path_factory) -> Path:
    """A complete data set from 8 prose documents, made by a finished `pretrain_data` run."""
    root = tmp_path_factory.mktemp("previous")
    corpus = root / "corpus"
    corpus.mkdir()
    for i, topic in enumerate(TOPICS):
        (corpus / f"{i:02d}_{topic}.txt").write_text(prose_document(topic), encoding="utf-8")
    env = {**os.environ, "MLFLOW_TRACKING_URI": new_store(root)}
    env["MLFLOW_ARTIFACT_LOCATION"] = (root / "mlartifacts").as_uri()
    params = _params(root / "data", corpus, "prose_folder")
    args = [project_root, json.dumps(params), "pretrain_data", "", ""]
    subprocess.run([sys.executable, "-c", SESSION, *map(str, args)], check=True, env=env)
    return root / "data"


@pytest.fixture
def data_dir(previous_set: Path, tmp_path: Path) -> Path:
    shutil.copytree(previous_set, tmp_path / "data")
    return tmp_path / "data"


@pytest.fixture
def new_corpus(tmp_path: Path) -> Path:
    """12 WikiExtractor articles: another corpus than the previous set's."""
    names = ["AA/wiki_00", "AA/wiki_01", "AB/wiki_00"]
    files = {n: [f"{t} {k}" for t in TOPICS[:4]] for k, n in enumerate(names)}
    return write_wikiextractor(tmp_path / "wiki", files)


def _kill_at(project_root: Path, params: dict, pause: str, ready: Path) -> None:
    proc = _session(project_root, params, "pretrain_data", pause, ready)
    deadline = time.time() + 300
    while not ready.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert ready.exists(), f"the data run ended (rc {proc.returncode}) before {pause}"


def _assert_consistent(data_dir: Path) -> dict:
    """Tokenizer, examples and statistics of one data run; returns the statistics."""
    examples = load_example_shards(data_dir / EXAMPLES)
    tokenizer = load_tokenizer(data_dir / SET["tokenizer"])
    assert examples.manifest["tokenizer_sha256"] == tokenizer_fingerprint(tokenizer)
    stats = json.loads((data_dir / STATISTICS).read_text())
    assert stats["examples_generation"] == examples.manifest["generation"]
    assert stats["n_examples"] == examples.table().num_rows
    return stats


def _assert_trains_on_it(project_root: Path, data_dir: Path) -> dict:
    """The next pretrain_model run trains on a consistent set, and its card describes these
    examples; nothing hidden is left. Returns the set's statistics."""
    _run(project_root, {"data_dir": str(data_dir), **TINY_RUN}, "pretrain_model")
    stats = _assert_consistent(data_dir)
    card = (data_dir / "06_models" / "bert_pretrained" / "README.md").read_text()
    assert f"{stats['n_examples']:,} examples from {stats['n_documents']:,} documents" in card
    assert not [p.name for p in data_dir.rglob(".*") if p.name != ".run.lock"]
    return stats


@pytest.mark.parametrize(
    "pause",
    [
        "bert_pipeline.io.example_shards_dataset:compute",  # shards written, no manifest yet
        "bert_pipeline.data.stats:merge_statistics",  # examples saved, no report yet
    ],
    ids=["during_example_creation", "before_the_statistics_are_saved"],
)
def test_a_killed_data_run_leaves_the_previous_set(
    project_root, mlflow_uri, data_dir, new_corpus, tmp_path, pause
):
    before = _digest(data_dir)
    params = _params(data_dir, new_corpus, "wikiextractor")
    _kill_at(project_root, params, pause, tmp_path / "ready")

    assert _digest(data_dir) == before
    assert _assert_trains_on_it(project_root, data_dir)["n_documents"] == 8
    assert _digest(data_dir) == before


def test_a_data_run_killed_mid_commit_is_completed_by_the_next_run(
    project_root, mlflow_uri, data_dir, new_corpus, tmp_path
):
    before = _digest(data_dir)
    params = _params(data_dir, new_corpus, "wikiextractor")
    _kill_at(project_root, params, "bert_pipeline.fsutil:swap_in", tmp_path / "ready")
    assert (data_dir / ".pretrain_data.commit").is_file()  # the journal of the cut commit

    assert _assert_trains_on_it(project_root, data_dir)["n_documents"] == 12  # the new set
    after = _digest(data_dir)
    # every file of the new set is the new run's; both corpora are clean text, so their lists
    # of warnings are the same empty list
    warnings = SET["pretrain_corpus_warnings"]
    assert after[warnings] == before[warnings] == hashlib.sha256(b"[]").hexdigest()
    changed = [after[path] != digest for path, digest in before.items() if path in after]
    assert changed.count(False) == 1


def test_a_failed_data_run_leaves_the_previous_set(project_root, mlflow_uri, data_dir, tmp_path):
    """An empty corpus fails the run after the documents node; nothing of the set changes."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.txt").write_text("\n\n   \n", encoding="utf-8")
    before = _digest(data_dir)
    with pytest.raises(Exception, match="no non-empty documents"):
        _run(project_root, _params(data_dir, empty, "prose_folder"), "pretrain_data")
    assert _digest(data_dir) == before
    assert not [p.name for p in data_dir.rglob(".*") if p.name != ".run.lock"]


def test_a_from_nodes_run_commits_what_it_remakes(project_root, mlflow_uri, data_dir, tmp_path):
    """`--from-nodes create_examples` stages and commits examples and report; the documents,
    sentences and tokenizer it reads stay the committed ones."""
    before = _digest(data_dir)
    params = _params(data_dir, tmp_path / "unused", "prose_folder")
    params["pretrain_data"] = DATA_PARAMS | {"examples": DATA_PARAMS["examples"] | {"seed": 7}}
    _run(project_root, params, "pretrain_data", from_nodes=["pretrain_data.create_examples"])
    after = _digest(data_dir)
    remade = [p for p in before if p.startswith((EXAMPLES, STATISTICS))]
    assert {p: after[p] for p in before if p not in remade} == {
        p: before[p] for p in before if p not in remade
    }
    assert all(after[p] != before[p] for p in remade if p.endswith((".arrow", ".json")))
    _assert_consistent(data_dir)
    assert not [p.name for p in data_dir.rglob(".*") if p.name != ".run.lock"]


def test_half_swapped_examples_and_tokenizer_are_recovered_by_pretrain_model(
    project_root, mlflow_uri, data_dir
):
    """A kill between the two renames of a folder swap: `.old` there, the target missing."""
    before = _digest(data_dir)
    for relative in (EXAMPLES, SET["tokenizer"]):
        path = data_dir / relative
        os.replace(path, path.with_name(f".{path.name}.old"))
    _assert_trains_on_it(project_root, data_dir)
    assert _digest(data_dir) == before


def test_an_edited_manifest_is_refused_before_training(project_root, mlflow_uri, data_dir):
    manifest = data_dir / EXAMPLES / "manifest.json"
    edited = json.loads(manifest.read_text()) | {"n_examples": 999999}
    manifest.write_text(json.dumps(edited))
    with pytest.raises(DatasetError, match=r"manifest.json says n_examples=999999, the") as err:
        _run(project_root, {"data_dir": str(data_dir), **TINY_RUN}, "pretrain_model")
    assert "\n" not in str(err.value)
    assert not (data_dir / "06_models" / "bert_pretrained").exists()


def test_statistics_of_other_examples_are_refused_before_training(
    project_root, mlflow_uri, data_dir
):
    report = data_dir / STATISTICS
    report.write_text(json.dumps(json.loads(report.read_text()) | {"examples_generation": "0f"}))
    with pytest.raises(ValueError, match=r"pretrain_data_statistics.json describes examples"):
        _run(project_root, {"data_dir": str(data_dir), **TINY_RUN}, "pretrain_model")
    assert not (data_dir / "06_models" / "bert_pretrained").exists()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[: len(b) // 2], r"part-00001.arrow has \d+ bytes, the manifest recorded"),
        (lambda b: b[:-16] + bytes(16), r"part-00001.arrow is not a readable Arrow IPC file"),
    ],
    ids=["truncated", "damaged_footer"],
)
def test_a_damaged_shard_is_named(previous_set: Path, tmp_path: Path, damage, message):
    folder = tmp_path / "examples"
    shutil.copytree(previous_set / EXAMPLES, folder)
    shard = folder / "part-00001.arrow"
    shard.write_bytes(damage(shard.read_bytes()))
    with pytest.raises(DatasetError, match=message) as err:
        ExampleShardsDataset(str(folder)).load()
    assert "\n" not in str(err.value)
