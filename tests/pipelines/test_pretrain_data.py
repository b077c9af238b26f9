"""End-to-end `kedro run --pipeline pretrain_data` on a tiny corpus, tracked in a temp MLflow store.

Every output path in conf/base/catalog_pretrain_data.yml sits under the runtime parameter
`data_dir`, so the run writes into tmp_path and never into the repository's data/.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pandas as pd
import pyarrow as pa
import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from kedro.io import DatasetError
from mlflow.tracking import MlflowClient

from bert_pipeline.data.shards import ExampleShards, load_example_shards, tokenizer_fingerprint
from bert_pipeline.data.tokenizer import load_tokenizer


def _run(project_root: Path, runtime_params: dict) -> None:
    bootstrap_project(project_root)
    with KedroSession.create(project_path=project_root, runtime_params=runtime_params) as session:
        session.run(pipeline_names=["pretrain_data"])


def _params(tmp_path: Path, corpus: Path, kind: str = "prose_folder", **examples) -> dict:
    return {
        "data_dir": str(tmp_path / "data"),
        "corpus": {"path": str(corpus), "kind": kind},
        "pretrain_data": {
            "tokenizer": {"vocab_size": 200},
            "examples": {"max_seq_length": 64, "dupe_factor": 2, **examples},
            "dask": {"n_workers": 2},
        },
    }


def test_pretrain_data_pipeline_end_to_end(
    project_root, mlflow_uri, tmp_path, wikiextractor_folder
):
    """WikiExtractor input on a 2-worker LocalCluster, a partition per file, 3 shards of 4+
    documents."""
    params = _params(tmp_path, wikiextractor_folder, "wikiextractor", documents_per_shard=4)
    params["corpus"]["partition_size"] = 1
    _run(project_root, params)

    data = tmp_path / "data"
    shards = load_example_shards(data / "05_model_input" / "pretraining_examples")
    assert len(shards.paths()) == 3
    examples = shards.table().to_pandas()
    assert examples["example_id"].is_unique
    assert examples["input_ids"].map(len).max() <= 64
    tokenizer = load_tokenizer(data / "06_models" / "tokenizer")
    assert shards.manifest["tokenizer_sha256"] == tokenizer_fingerprint(tokenizer)
    stats = json.loads((data / "08_reporting" / "pretrain_data_statistics.json").read_text())
    assert stats["n_warnings"] == 0 and stats["truncated_share"] < 0.2  # clean prose
    assert stats["n_examples"] == len(examples) and stats["n_shards"] == 3
    assert stats["n_documents"] == 12
    # counted by the workers that built the shards, kept per shard in the manifest
    assert stats["n_tokens"] == examples["input_ids"].map(len).sum()
    kept = shards.manifest["shards"]
    assert [s["statistics"]["n_examples"] for s in kept] == [s["rows"] for s in kept]
    assert len(list((data / "02_intermediate" / "pretrain_documents").glob("*.parquet"))) == 3

    client = MlflowClient(tracking_uri=mlflow_uri)
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert len(runs) == 1
    run = runs[0]
    assert run.data.params["pretrain_data.examples.max_seq_length"] == "64"
    assert run.data.params["pretrain_data.tokenizer.vocab_size"] == "200"
    # a constant of the run: a parameter, not a one-point metric chart (issue #32)
    assert run.data.params["pretrain_data.n_examples"] == str(len(examples))
    assert not [k for k in run.data.metrics if k.startswith("pretrain_data.")]
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "pretrain_data")]
    assert artifacts == ["pretrain_data/pretrain_data_statistics.json"]


def test_the_summary_line_of_dynamic_masks_says_so(
    project_root, mlflow_uri, tmp_path, prose_folder, monkeypatch
):
    """Dynamic masks are drawn in training, so the examples have no mask rate to report: the
    summary line says that instead of "selected nan"."""
    from bert_pipeline.pipelines.pretrain_data import nodes

    lines = []
    monkeypatch.setattr(nodes.logger, "info", lambda message, *args: lines.append(message % args))
    _run(project_root, _params(tmp_path, prose_folder, masking="dynamic"))
    (line,) = [x for x in lines if "examples from" in x]
    assert "masks drawn in training" in line and "nan" not in line


def test_pretrain_data_bad_parameter_leaves_no_examples(
    project_root, mlflow_uri, tmp_path, prose_folder
):
    with pytest.raises(ValueError, match="max_seq_length=4 is too small"):
        _run(project_root, _params(tmp_path, prose_folder, max_seq_length=4))
    assert not (tmp_path / "data" / "05_model_input" / "pretraining_examples").exists()


def test_catalog_validators_reject_bad_tables(project_root, tmp_path):
    """The catalog's `validator:` keys enforce the schemas on save (Kedro-native validation)."""
    from kedro.config import OmegaConfigLoader
    from kedro.io import DataCatalog
    from kedro.validation.exceptions import DataValidationError

    loader = OmegaConfigLoader(
        str(project_root / "conf"),
        base_env="base",
        default_run_env="local",
        runtime_params={"data_dir": str(tmp_path / "data")},
    )
    catalog = DataCatalog.from_config(loader["catalog"])
    docs = pd.DataFrame(
        {"doc_id": ["a", "a"], "source": ["f", "f"], "text": ["x", "y"], "layout": ["prose"] * 2}
    )
    with pytest.raises(DataValidationError, match="pretrain_documents"):
        catalog.save("pretrain_documents", docs)
    assert not (tmp_path / "data" / "02_intermediate").exists()

    good = {
        "example_id": [0],
        "input_ids": [[2, 7, 3, 8, 3]],
        "token_type_ids": [[0, 0, 0, 1, 1]],
        "masked_lm_positions": [[3]],
        "masked_lm_ids": [[9]],
        "next_sentence_label": [0],
        "a_doc_id": ["d"],
        "b_doc_id": ["d"],
        "a_sent_start": [0],
        "a_sent_end": [1],
        "b_sent_start": [1],
        "b_sent_end": [2],
    }
    frame = pd.DataFrame(good).astype(
        {"next_sentence_label": "int8", **{c: "int32" for c in list(good)[-4:]}}
    )
    catalog.save("pretraining_examples", _shards(frame))
    bad = frame.copy()
    bad["masked_lm_positions"] = [[2]]  # the first [SEP]
    with pytest.raises(DatasetError, match=r"part-00000.arrow: ExamplesSchema failed\n.*1 failure"):
        catalog.save("pretraining_examples", _shards(bad))
    assert catalog.load("pretraining_examples").table().num_rows == 1  # the good set is kept


def _shards(frame: pd.DataFrame) -> ExampleShards:
    return ExampleShards([pa.Table.from_pandas(frame, preserve_index=False)], {})


def test_wikitext_setting_through_kedro_run(project_root, mlflow_uri, tmp_path):
    """The WikiText setting of docs/pretraining_data.md passes the catalog's schemas: its
    documents start with a space (` = Title = ` lines, then ` text`), which an anchored text
    check used to reject."""
    from tests.data.conftest import TOPICS, prose_document

    articles = []
    for topic in TOPICS[:4]:
        body = prose_document(topic, 2).replace("\n\n", "\n \n ")
        articles.append(f" = {topic.title()} = \n \n {body}\n = = History = = \n \n {body}\n")
    (tmp_path / "wiki.valid.raw").write_text("".join(articles), encoding="utf-8")
    params = _params(tmp_path, tmp_path / "wiki.valid.raw", documents_per_shard=2)
    params["corpus"].update(
        document_delimiter=r"^ = [^=].* = $", skip_line_regex=r"^ (= )+.*( =)+ $"
    )
    _run(project_root, params)
    shards = load_example_shards(tmp_path / "data" / "05_model_input" / "pretraining_examples")
    frame = shards.table().to_pandas()
    assert sorted(frame["a_doc_id"].unique()) == [f"wiki.valid:{k}" for k in range(4)]


def test_summary_refuses_examples_without_shard_statistics(tmp_path):
    """Examples written before the workers counted them: one line saying to rebuild them."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece

    from bert_pipeline.pipelines.pretrain_data.nodes import summarize_examples

    tokenizer = Tokenizer(WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    manifest = {"tokenizer_sha256": tokenizer_fingerprint(tokenizer), "generation": "g"}
    examples = ExampleShards([tmp_path / "part-00000.arrow"], manifest)
    with pytest.raises(ValueError, match="no statistics per shard.*rebuild the examples"):
        summarize_examples(examples, tokenizer, None, {})
