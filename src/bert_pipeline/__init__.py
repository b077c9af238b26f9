"""bert_pipeline: BERT pretraining and GLUE fine-tuning as a tracked Kedro workflow."""

__version__ = "0.1.0"
