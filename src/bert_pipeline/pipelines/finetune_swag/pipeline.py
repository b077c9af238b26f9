"""SWAG: example tables, then fine-tuning with the multiple-choice head (the paper, 4.4), in the
namespace `swag` (its datasets are `swag.<name>` in the catalog)."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from bert_pipeline.pipelines.finetune_swag.nodes import build_swag_tables, finetune_swag_model

PARAMS = "params:finetune_swag"


def create_pipeline(**kwargs) -> Pipeline:
    nodes = Pipeline(
        [
            Node(
                build_swag_tables,
                inputs=["raw", PARAMS],
                outputs=["examples_train", "examples_dev", "examples_test"],
                name="build_tables",
                tags=["swag_data"],
            ),
            Node(
                finetune_swag_model,
                inputs=[
                    "examples_train",
                    "examples_dev",
                    "examples_test",
                    "pretrained_model",
                    PARAMS,
                ],
                outputs=["model", "metrics", "dev_predictions", "test_predictions"],
                name="finetune",
                tags=["swag_training"],
            ),
        ]
    )
    return Pipeline(nodes, namespace="swag", parameters={PARAMS: PARAMS})
