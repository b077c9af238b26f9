"""`pretrain_model`: examples + tokenizer -> pretrained BERT, training history and loss curve."""

from bert_pipeline.pipelines.pretrain_model.pipeline import create_pipeline

__all__ = ["create_pipeline"]
