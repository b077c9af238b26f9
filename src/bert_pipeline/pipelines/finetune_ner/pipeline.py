"""NER pipelines: the CoNLL tables, then fine-tuning or the feature-based tagger.

`finetune_ner` fine-tunes all of BERT; `finetune_ner_features` extracts the frozen encoder's
word features once into the catalog (`ner_feature_cache`) and trains only a BiLSTM tagger on
them, so a new layer choice or tagger setting reruns in minutes with
`--from-nodes train_ner_feature_tagger`.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from bert_pipeline.pipelines.finetune_ner.nodes import (
    build_ner_tables,
    extract_ner_features,
    finetune_ner_model,
    train_ner_feature_tagger,
)

PARAMS = "params:finetune_ner"
TABLES = ["ner_sentences_train", "ner_sentences_dev", "ner_sentences_test"]


def data_pipeline() -> Pipeline:
    return Pipeline(
        [
            Node(
                build_ner_tables,
                inputs=["conll_raw", PARAMS],
                outputs=TABLES,
                name="build_ner_tables",
                tags=["ner_data"],
            )
        ]
    )


def create_pipeline(**kwargs) -> Pipeline:
    """Fine-tuning (`finetune_ner`)."""
    return data_pipeline() + Pipeline(
        [
            Node(
                finetune_ner_model,
                inputs=[*TABLES, "ner_pretrained_model", PARAMS],
                outputs=[
                    "ner_model",
                    "ner_metrics_finetune",
                    "ner_predictions_finetune_dev",
                    "ner_predictions_finetune_test",
                ],
                name="finetune_ner",
                tags=["ner_training"],
            )
        ]
    )


def create_feature_pipeline(**kwargs) -> Pipeline:
    """The feature-based approach (`finetune_ner_features`)."""
    return data_pipeline() + Pipeline(
        [
            Node(
                extract_ner_features,
                inputs=[*TABLES, "ner_pretrained_model", PARAMS],
                outputs="ner_feature_cache",
                name="extract_ner_features",
                tags=["ner_features"],
            ),
            Node(
                train_ner_feature_tagger,
                inputs=[*TABLES, "ner_feature_cache", PARAMS],
                outputs=[
                    "ner_feature_tagger",
                    "ner_metrics_feature_based",
                    "ner_predictions_feature_based_dev",
                    "ner_predictions_feature_based_test",
                ],
                name="train_ner_feature_tagger",
                tags=["ner_features"],
            ),
        ]
    )
