"""The data stages on Dask: WikiExtractor input, determinism across workers, sharded statistics,
all-or-nothing example saves, dead workers and unreachable schedulers."""

from __future__ import annotations

import asyncio
import bz2
import gzip
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from dask import delayed
from kedro.io import DatasetError

from bert_pipeline.data.cluster import ClusterError, close_client, open_client
from bert_pipeline.data.corpus import CorpusError, ingest_documents
from bert_pipeline.data.examples import ExampleConfig
from bert_pipeline.data.shards import ExampleShards, load_example_shards
from bert_pipeline.data.stages import documents_frame, example_shards, sentences_frame
from bert_pipeline.data.stats import merge_statistics, partial_statistics
from bert_pipeline.data.tokenizer import train_tokenizer
from bert_pipeline.io.example_shards_dataset import ExampleShardsDataset
from bert_pipeline.params import ConfigError
from bert_pipeline.schemas.pretraining import ExamplesFrameSchema
from tests.data.conftest import write_wikiextractor

WIKI = {"kind": "wikiextractor", "partition_size": 1}  # a partition per file: several here


def test_wikiextractor_articles_from_gzip_and_bz2(wikiextractor_folder: Path):
    plain = (wikiextractor_folder / "AB" / "wiki_00.gz").read_bytes()
    (wikiextractor_folder / "AB" / "wiki_00.gz").unlink()
    (wikiextractor_folder / "AB" / "wiki_00.bz2").write_bytes(bz2.compress(gzip.decompress(plain)))
    docs = ingest_documents({**WIKI, "path": str(wikiextractor_folder)})
    assert len(docs) == 12 and docs["doc_id"].tolist()[:2] == ["100", "101"]
    assert docs["source"].str.endswith("wiki_00.bz2").sum() == 4
    text = docs["text"].iloc[0]
    assert not text.startswith("River 0") and "History" not in text  # title, heading dropped
    assert text.count("\n\n") == 2  # three paragraphs
    kept = ingest_documents(
        {**WIKI, "path": str(wikiextractor_folder), "title_line": "keep", "heading_lines": "keep"}
    )
    assert kept["text"].iloc[0].startswith("River 0\n\n") and "\n\nHistory\n\n" in kept["text"][0]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not gzip at all", r"wiki_00.gz: not a readable .gz file"),
        (
            gzip.compress(b'<doc id="1" url="u" title="t">\nT\nSome text.\n</doc>\n', mtime=0)[
                :-12
            ],
            "corrupt",
        ),
        (
            gzip.compress(b'<doc id="1" url="u" title="t">\nT\nText that stops.\n', mtime=0),
            r"doc id='1' \(line 1\) has no </doc>",
        ),
    ],
)
def test_bad_wikiextractor_file_is_named(tmp_path: Path, content: bytes, message: str):
    (tmp_path / "AA").mkdir()
    (tmp_path / "AA" / "wiki_00.gz").write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        ingest_documents({**WIKI, "path": str(tmp_path)})


def _examples_with_workers(n_workers: int, folder: Path, tokenizer, cfg) -> list[pa.Table]:
    client = open_client({"n_workers": n_workers})
    try:
        sentences, _ = sentences_frame(documents_frame({**WIKI, "path": str(folder)}), "en")
        return list(client.gather(client.compute(example_shards(sentences, tokenizer, cfg, 5))))
    finally:
        close_client(client)


def test_examples_identical_for_one_and_two_workers(tmp_path: Path, wikiextractor_folder: Path):
    docs = ingest_documents({**WIKI, "path": str(wikiextractor_folder)})
    tokenizer = train_tokenizer(docs["text"], vocab_size=300)
    cfg = ExampleConfig(max_seq_length=48, dupe_factor=2, seed=3)
    one = _examples_with_workers(1, wikiextractor_folder, tokenizer, cfg)
    two = _examples_with_workers(2, wikiextractor_folder, tokenizer, cfg)
    assert len(one) == 2  # 12 documents, 5 per shard: shards of 6 and 6
    assert all(a.equals(b) for a, b in zip(one, two, strict=True))
    for table in one:  # a random B comes from another document of the same shard
        frame = table.to_pandas()
        assert set(frame["b_doc_id"]) <= set(frame["a_doc_id"])
        assert frame["a_doc_id"].nunique() == 6


def test_sharded_examples_keep_googles_statistics_on_wikipedia(shared_data, bert_vocab):
    """Two real WikiExtractor files (~600 articles) in shards of 150 articles."""
    folder = shared_data / "corpora" / "wikipedia-en"
    source = {**WIKI, "path": str(folder / "AA"), "glob": "wiki_0[01].gz"}
    cfg = ExampleConfig(max_seq_length=128, dupe_factor=2, seed=11)
    sentences, _ = sentences_frame(documents_frame(source), "en")
    tables = [t.compute() for t in example_shards(sentences, bert_vocab, cfg, 150)]
    assert len(tables) >= 3
    from bert_pipeline.data.examples import vocab_from_tokenizer

    vocab = vocab_from_tokenizer(bert_vocab)
    stats = merge_statistics([partial_statistics(t, cfg, vocab) for t in tables], cfg)
    assert abs(stats["selected_rate_uncapped"] - 0.15) < 0.01
    assert abs(stats["mask_token_rate"] - 0.8) < 0.02
    assert abs(stats["kept_rate"] - 0.1) < 0.02 and abs(stats["random_token_rate"] - 0.1) < 0.02
    assert 0.40 <= stats["is_next_rate"] <= 0.55
    for table in tables:
        frame = ExamplesFrameSchema.validate(table.to_pandas(), lazy=True)  # consecutive IsNext
        assert set(frame["b_doc_id"]) <= set(frame["a_doc_id"])
        assert frame["input_ids"].map(len).max() <= 128


def _table(n: int) -> pa.Table:
    return pa.table({"x": np.arange(n)})


def test_a_killed_save_leaves_the_previous_set(tmp_path: Path):
    target = tmp_path / "examples"
    ExampleShardsDataset(str(target)).save(ExampleShards([_table(3), _table(4)], {"run": 1}))
    script = textwrap.dedent(
        f"""
        import time
        from dask import delayed
        from bert_pipeline.data.shards import ExampleShards
        from bert_pipeline.io.example_shards_dataset import ExampleShardsDataset
        import pyarrow as pa
        slow = delayed(lambda: time.sleep(60) or pa.table({{"x": [1]}}))()
        parts = [pa.table({{"x": [1, 2]}}), slow]
        ExampleShardsDataset({str(target)!r}).save(ExampleShards(parts, {{"run": 2}}))
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while not list(tmp_path.glob(".examples.*/part-00000.arrow")) and time.time() < deadline:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(tmp_path.glob(".examples.*")), "the kill should have left a temporary folder"

    shards = ExampleShardsDataset(str(target)).load()
    assert shards.manifest["run"] == 1 and shards.table().num_rows == 7
    assert not list(tmp_path.glob(".examples.*"))  # cleaned up by the next access


def test_a_kill_between_the_two_renames_is_undone(tmp_path: Path):
    target = tmp_path / "examples"
    ExampleShardsDataset(str(target)).save(ExampleShards([_table(3)], {"run": 1}))
    os.replace(target, tmp_path / ".examples.old")  # first rename done, second not
    (tmp_path / ".examples.abc123").mkdir()  # the new set, never swapped in
    assert load_example_shards(target).manifest["run"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["examples"]


def _die() -> pa.Table:
    os._exit(1)


def test_a_dead_worker_is_named_and_the_previous_set_kept(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    target = tmp_path / "examples"
    ExampleShardsDataset(str(target)).save(ExampleShards([_table(3)], {"run": 1}))
    client = open_client({"n_workers": 1, "allowed_failures": 0})
    try:
        parts = [_table(2), delayed(_die)()]
        with pytest.raises(
            DatasetError, match=r"create_examples: a worker died .*part-00001.arrow"
        ):
            ExampleShardsDataset(str(target)).save(ExampleShards(parts, {"run": 2}))
    finally:
        close_client(client)
    assert "OMP_NUM_THREADS" not in os.environ  # nor where the nanny restarted its worker
    assert load_example_shards(target).manifest["run"] == 1
    assert not list(tmp_path.glob(".examples.*"))


def test_the_workers_thread_limits_stay_out_of_this_process(monkeypatch):
    """Dask's nannies write OMP_NUM_THREADS=1 (for their workers) into the environment of the
    process that starts them, where torch would later read it and train on one core."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    client = open_client({"n_workers": 1})
    try:
        workers = client.run(lambda: os.environ.get("OMP_NUM_THREADS"))
        assert "OMP_NUM_THREADS" not in os.environ
    finally:
        close_client(client)
    assert list(workers.values()) == ["1"]
    assert "OMP_NUM_THREADS" not in os.environ


async def _close_during_a_heartbeat(dask_worker, log: str, keep_filter: bool) -> None:
    """Closes the worker while its heartbeat's connection is still being made (the race of
    `Worker.close` that printed a traceback after a finished stage), logging to `log`. The
    connect is held back through the pool's private `_connect`: the only place to pin the race."""
    worker_logger = logging.getLogger("distributed.worker")
    if not keep_filter:
        worker_logger.filters.clear()
    worker_logger.addHandler(logging.FileHandler(log))
    pool = dask_worker.rpc
    connect = pool._connect

    async def held_back(*args, **kwargs):
        pool._connect = connect  # the close's own calls go through
        await asyncio.sleep(5)
        return await connect(*args, **kwargs)

    pool._connect = held_back
    for comms in pool.available.values():
        comms.clear()
    dask_worker.loop.add_callback(dask_worker.heartbeat)
    await asyncio.sleep(0.2)
    dask_worker.loop.add_callback(dask_worker.close)


def test_a_closing_workers_heartbeat_failure_stays_off_the_console(tmp_path: Path):
    """Of two workers closed mid-heartbeat, only the one without the project's filter logs it."""
    client = open_client({"n_workers": 2})
    try:
        for worker, keep in zip(
            sorted(client.scheduler_info()["workers"]), (True, False), strict=True
        ):
            log = str(tmp_path / f"{keep}.log")
            client.run(
                _close_during_a_heartbeat, log=log, keep_filter=keep, workers=[worker], wait=False
            )
        time.sleep(1.5)
    finally:
        close_client(client)
    failed = "Failed to communicate with scheduler during heartbeat"
    assert failed not in (tmp_path / "True.log").read_text()
    assert failed in (tmp_path / "False.log").read_text()


def test_unreachable_scheduler_names_the_parameter():
    with pytest.raises(ClusterError, match=r"pretrain_data.dask.scheduler_address='tcp://127"):
        open_client({"scheduler_address": "tcp://127.0.0.1:9", "connect_timeout": "1s"})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"workers": 2}, r"pretrain_data.dask.workers: Key 'workers' not in"),
        ({"n_workers": "abc"}, r"pretrain_data.dask.n_workers: Value 'abc'"),
        ({"memory_limit": "lots"}, r"pretrain_data.dask.memory_limit='lots' must be auto"),
        ({"threads_per_worker": 0}, r"pretrain_data.dask.threads_per_worker=0 must be >= 1"),
        ({"start_method": "threads"}, r"pretrain_data.dask.start_method='threads' must be one"),
    ],
)
def test_bad_dask_parameters_are_refused_by_name(params, message):
    with pytest.raises(ConfigError, match=message):
        open_client(params)


def test_workers_are_forked_on_linux_and_spawned_elsewhere(monkeypatch):
    """fork starts a worker in ~0.1 s against ~1.7 s for a fresh interpreter (spawn); macOS's
    system libraries are not fork-safe, so auto spawns there."""
    from bert_pipeline.data.cluster import dask_params, start_method

    monkeypatch.setattr("sys.platform", "linux")
    assert start_method(dask_params({})) == "fork"
    assert start_method(dask_params({"start_method": "spawn"})) == "spawn"
    monkeypatch.setattr("sys.platform", "darwin")
    assert start_method(dask_params({})) == "spawn"


def test_documents_frame_partitions_hold_partition_size_bytes(wikiextractor_folder: Path):
    frame = documents_frame({**WIKI, "path": str(wikiextractor_folder)})
    assert frame.npartitions == 3 and len(frame.compute()) == 12
    packed = documents_frame({**WIKI, "path": str(wikiextractor_folder), "partition_size": "2MiB"})
    assert packed.npartitions == 1
    assert packed.compute()["doc_id"].tolist() == frame.compute()["doc_id"].tolist()
    capped = documents_frame({**WIKI, "path": str(wikiextractor_folder), "max_documents": 5})
    assert len(capped.compute()) == 5


def test_duplicate_doc_ids_across_files_are_named(tmp_path: Path):
    write_wikiextractor(tmp_path / "w", {"AA/wiki_00": ["river"], "AA/wiki_01": ["lake"]})
    write_wikiextractor(tmp_path / "w", {"AB/wiki_00": ["hill"]}, start_id=100)
    with pytest.raises(CorpusError, match="duplicate doc_id '100'"):
        sentences_frame(documents_frame({**WIKI, "path": str(tmp_path / "w")}), "en")


def test_a_corpus_of_one_document_is_refused_before_sharding(tmp_path: Path):
    write_wikiextractor(tmp_path / "w", {"AA/wiki_00": ["river"]})
    sentences, _ = sentences_frame(documents_frame({**WIKI, "path": str(tmp_path / "w")}), "en")
    with pytest.raises(CorpusError, match="the corpus has one document"):
        example_shards(sentences, train_tokenizer(["a river"], vocab_size=60), ExampleConfig(), 2)


def test_an_existing_scheduler_is_used_by_address_and_left_running(wikiextractor_folder: Path):
    """What `dask scheduler` + `dask worker` (or a SLURMCluster) look like to the pipeline."""
    from distributed import Client, LocalCluster

    # patch.dict: the nanny writes its worker's OMP_NUM_THREADS=1 into this test process too
    with (
        mock.patch.dict(os.environ),
        LocalCluster(n_workers=1, processes=True, dashboard_address=None) as cluster,
    ):
        client = open_client({"scheduler_address": cluster.scheduler_address})
        try:
            docs = documents_frame({**WIKI, "path": str(wikiextractor_folder)})
            sentences, _ = sentences_frame(docs, "en")
            assert sentences.npartitions == 3
        finally:
            close_client(client)
        with Client(cluster.scheduler_address) as again:  # still there for its owner
            assert len(again.nthreads()) == 1


def test_binary_looking_input_is_named():
    """Found in the pass that counts the documents; a source spread over partitions is
    judged as a whole (blob.bin's second document is clean text)."""
    import dask.dataframe as dd
    import pandas as pd

    frame = pd.DataFrame(
        {
            "doc_id": ["a", "b", "c"],
            "source": ["ok.txt", "blob.bin", "blob.bin"],
            "text": ["Plain prose. " * 20, "\ufffd\x00ELF\ufffd" * 30, "x" * 100],
            "layout": ["prose"] * 3,
        }
    )
    _, (line,) = sentences_frame(dd.from_pandas(frame, npartitions=2), "en")
    assert line.startswith("blob.bin: 32% of its characters") and "looks binary" in line


def _finish_time(seconds: float) -> float:
    time.sleep(seconds)
    return time.time()


def test_a_stage_returns_right_after_its_last_task_and_draws_its_bar_sparingly(capfd):
    """The bar asks the scheduler every 20 ms whether the stage is done (with distributed's
    100 ms, a stage returned ~50 ms after its last task, every stage of every run), and redraws
    the console line at most every 0.1 s. With a 100 ms poll each of these 0.2 s stages returned
    45-55 ms late, with 20 ms 10-22 ms; a loaded machine delays some stages by 20 ms more, so
    the second fastest of the five is what is compared."""
    from bert_pipeline.data.cluster import compute

    client = open_client({"n_workers": 1})
    try:
        late = []
        for _ in range(5):
            (finished,) = compute("sleep", [delayed(_finish_time, pure=False)(0.2)])
            late.append(time.time() - finished)
        compute("sleep", [delayed(_finish_time, pure=False)(0.1) for _ in range(5)])
    finally:
        close_client(client)
    assert sorted(late)[1] < 0.035, late
    bars = capfd.readouterr().out.split("\x1b[2K")[:-1]  # each stage's bar ends by clearing
    assert len(bars) == 6 and all("100% Completed" in bar for bar in bars)
    assert bars[-1].count("% Completed") <= 8  # 0.5 s of tasks: ~6 lines, not 25


def test_a_bar_that_never_hears_back_does_not_hold_the_stage(monkeypatch, caplog):
    """Once, under heavy load, a run sat for ever inside distributed's bar with both workers
    idle: a bar that has not heard the end PROGRESS_GRACE_S after the futures are done is
    dropped, with a warning."""
    from distributed.diagnostics.progressbar import TextProgressBar

    from bert_pipeline.data import cluster

    async def deaf(self):
        await asyncio.Event().wait()

    monkeypatch.setattr(TextProgressBar, "listen", deaf)
    monkeypatch.setattr(cluster, "PROGRESS_GRACE_S", 0.5)
    client = open_client({"n_workers": 1})
    try:
        results = []
        stage = threading.Thread(
            target=lambda: results.extend(cluster.compute("sleep", [delayed(_finish_time)(0.1)])),
            daemon=True,
        )
        with caplog.at_level(logging.WARNING, logger=cluster.__name__):
            stage.start()
            stage.join(timeout=30)
        assert not stage.is_alive(), "the stage waited on its progress bar"
    finally:
        close_client(client)
    assert len(results) == 1
    assert "sleep: done, its progress bar dropped" in caplog.text
