"""BERT pretraining with Lightning, usable without Kedro (the pipeline nodes are thin wrappers)."""

from bert_pipeline.training.config import TrainingConfig, TrainingConfigError
from bert_pipeline.training.data import PretrainingDataModule
from bert_pipeline.training.module import BertPretrainingModule
from bert_pipeline.training.trainer import TrainingResult, run_training

__all__ = [
    "BertPretrainingModule",
    "PretrainingDataModule",
    "TrainingConfig",
    "TrainingConfigError",
    "TrainingResult",
    "run_training",
]
