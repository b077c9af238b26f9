"""The `pretrain_data` pipeline: raw corpus to sharded BERT pretraining examples."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from bert_pipeline.pipelines.pretrain_data.nodes import (
    build_tokenizer,
    create_examples,
    ingest_corpus,
    split_sentences,
)


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                ingest_corpus,
                inputs="pretrain_corpus",
                outputs="pretrain_documents",
                name="ingest_corpus",
                tags=["pretrain_data"],
            ),
            Node(
                split_sentences,
                inputs=["pretrain_documents", "params:pretrain_data.language"],
                outputs="pretrain_sentences",
                name="split_sentences",
                tags=["pretrain_data"],
            ),
            Node(
                build_tokenizer,
                inputs=["pretrain_sentences", "params:pretrain_data.tokenizer"],
                outputs="tokenizer",
                name="build_tokenizer",
                tags=["pretrain_data", "tokenizer"],
            ),
            Node(
                create_examples,
                inputs=["pretrain_sentences", "tokenizer", "params:pretrain_data.examples"],
                outputs=[
                    "pretraining_examples",
                    "pretrain_data_statistics",
                    "pretrain_data_metrics",
                ],
                name="create_examples",
                tags=["pretrain_data"],
            ),
        ]
    )
