"""Pretraining data: tokenizer, sentence splitting, example creation and batching (no Kedro)."""
