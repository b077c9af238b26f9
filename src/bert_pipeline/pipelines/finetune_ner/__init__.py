"""NER on CoNLL-2003: fine-tuning (`finetune_ner`) and the feature-based tagger
(`finetune_ner_features`)."""

from bert_pipeline.pipelines.finetune_ner.pipeline import create_feature_pipeline, create_pipeline

__all__ = ["create_feature_pipeline", "create_pipeline"]
