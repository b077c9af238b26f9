"""`finetune_glue`: fine-tune a pretrained BERT on GLUE tasks, one namespace per task."""

from bert_pipeline.pipelines.finetune_glue.pipeline import create_pipeline

__all__ = ["create_pipeline"]
