"""SQuAD: question tables, then fine-tuning with the start/end head (the paper, 4.2-4.3)."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from bert_pipeline.pipelines.finetune_squad.nodes import build_squad_tables, finetune_squad_model

PARAMS = "params:finetune_squad"


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                build_squad_tables,
                inputs=["squad_raw", PARAMS],
                outputs=["squad_questions_train", "squad_questions_dev"],
                name="build_squad_tables",
                tags=["squad_data"],
            ),
            Node(
                finetune_squad_model,
                inputs=[
                    "squad_questions_train",
                    "squad_questions_dev",
                    "squad_pretrained_model",
                    PARAMS,
                ],
                outputs=["squad_model", "squad_metrics", "squad_predictions", "squad_null_odds"],
                name="finetune_squad",
                tags=["squad_training"],
            ),
        ]
    )
