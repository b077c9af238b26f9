"""Raw corpus -> documents -> sentences -> WordPiece tokenizer -> BERT pretraining examples."""

from bert_pipeline.pipelines.pretrain_data.pipeline import create_pipeline

__all__ = ["create_pipeline"]
