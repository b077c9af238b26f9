"""The `pretrain_data` pipeline: raw corpus to sharded BERT pretraining examples.

Nodes tagged `dask` run their work on the Dask cluster (`bert_pipeline.hooks`). The nodes sit in
the namespace `pretrain_data` (node names `pretrain_data.<node>`, dataset names unchanged), so
kedro-viz collapses this half of `pretrain`.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from bert_pipeline.pipelines.pretrain_data.nodes import (
    build_tokenizer,
    create_examples,
    ingest_corpus,
    split_sentences,
    summarize_examples,
)

TAGS = ["pretrain_data", "dask"]


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                ingest_corpus,
                inputs="pretrain_corpus",
                outputs="pretrain_documents",
                name="ingest_corpus",
                tags=TAGS,
            ),
            Node(
                split_sentences,
                inputs=["pretrain_documents", "params:pretrain_data.language"],
                outputs=["pretrain_sentences", "pretrain_corpus_warnings"],
                name="split_sentences",
                tags=TAGS,
            ),
            Node(
                build_tokenizer,
                inputs=["pretrain_sentences", "params:pretrain_data.tokenizer"],
                outputs="tokenizer",
                name="build_tokenizer",
                tags=[*TAGS, "tokenizer"],
            ),
            Node(
                create_examples,
                inputs=["pretrain_sentences", "tokenizer", "params:pretrain_data.examples"],
                outputs="pretraining_examples",
                name="create_examples",
                tags=TAGS,
            ),
            Node(
                summarize_examples,
                inputs=[
                    "pretraining_examples",
                    "tokenizer",
                    "pretrain_corpus_warnings",
                    "params:pretrain_data.examples",
                ],
                outputs=["pretrain_data_statistics", "pretrain_data_summary"],
                name="summarize_examples",
                tags=TAGS,
            ),
        ],
        namespace="pretrain_data",
        prefix_datasets_with_namespace=False,
    )
