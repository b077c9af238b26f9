"""Project pipelines."""

from __future__ import annotations

from kedro.pipeline import Pipeline

from bert_pipeline.pipelines import (
    finetune_glue,
    finetune_ner,
    finetune_squad,
    pretrain_data,
    pretrain_model,
)


def register_pipelines() -> dict[str, Pipeline]:
    """`pretrain` is corpus -> examples (`pretrain_data`) followed by training (`pretrain_model`).

    The pipelines are imported explicitly: Kedro 1.7's `find_pipelines` only imports the folders
    named on the command line, so a composed name such as `pretrain` would not be found.
    """
    pipelines = {
        "pretrain_data": pretrain_data.create_pipeline(),
        "pretrain_model": pretrain_model.create_pipeline(),
        "finetune_glue": finetune_glue.create_pipeline(),
        "finetune_ner": finetune_ner.create_pipeline(),
        "finetune_ner_features": finetune_ner.create_feature_pipeline(),
        "finetune_squad": finetune_squad.create_pipeline(),
    }
    pipelines["pretrain"] = pipelines["pretrain_data"] + pipelines["pretrain_model"]
    pipelines["__default__"] = pipelines["pretrain"]
    return pipelines
