"""`finetune_squad`: question answering on SQuAD v1.1 / v2.0."""

from bert_pipeline.pipelines.finetune_squad.pipeline import create_pipeline

__all__ = ["create_pipeline"]
