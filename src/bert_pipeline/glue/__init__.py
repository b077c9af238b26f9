"""GLUE fine-tuning: task registry, loaders, metrics and the Lightning training loop (no Kedro)."""
