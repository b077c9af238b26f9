"""BERT in plain PyTorch with Hugging Face-compatible weights (no Kedro, no transformers needed)."""

from bert_pipeline.model.bert import (
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BertPreTrainingOutput,
    hidden_states,
    num_parameters,
)
from bert_pipeline.model.config import PRESETS, BertConfig

__all__ = [
    "PRESETS",
    "BertConfig",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertPreTrainingOutput",
    "hidden_states",
    "num_parameters",
]
