"""Pretraining: examples + tokenizer (from `pretrain_data`) -> exported BERT and reports.

The nodes sit in the namespace `pretrain_model` (node names `pretrain_model.<node>`, dataset names
unchanged), so kedro-viz collapses this half of `pretrain`.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from bert_pipeline.pipelines.pretrain_model.nodes import (
    describe_pretrained_model,
    log_pretrained_model,
    plot_loss_curve,
    pretrain_bert,
)


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                pretrain_bert,
                inputs=["pretraining_examples", "tokenizer", "params:pretrain_model"],
                outputs=["pretrained_model", "pretrain_history", "pretrain_metrics"],
                name="pretrain_bert",
                tags=["training"],
            ),
            Node(
                describe_pretrained_model,
                inputs=[
                    "pretrained_model",
                    "pretrain_data_statistics",
                    "pretraining_examples",
                    "pretrain_metrics",
                    "params:pretrain_model",
                    "params:pretrained_mlflow_model",
                ],
                outputs="pretrained_model_card",
                name="describe_pretrained_model",
                tags=["reporting"],
            ),
            Node(
                log_pretrained_model,
                inputs=[
                    "pretrained_model",
                    "pretrained_model_card",
                    "pretraining_examples",
                    "pretrain_metrics",
                    "params:pretrained_mlflow_model",
                ],
                outputs="pretrained_model_mlflow",
                name="log_pretrained_model",
                tags=["tracking"],
            ),
            Node(
                plot_loss_curve,
                inputs="pretrain_history",
                outputs="pretrain_loss_curve",
                name="plot_loss_curve",
                tags=["reporting"],
            ),
        ],
        namespace="pretrain_model",
        prefix_datasets_with_namespace=False,
    )
