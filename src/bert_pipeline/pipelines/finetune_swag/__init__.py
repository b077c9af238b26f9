"""`finetune_swag`: SWAG multiple choice (the paper, 4.4)."""

from bert_pipeline.pipelines.finetune_swag.pipeline import create_pipeline

__all__ = ["create_pipeline"]
