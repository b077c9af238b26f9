"""Question answering on SQuAD v1.1 / v2.0: reading, doc-stride windows, span post-processing,
the official EM/F1, fine-tuning on the shared core (no Kedro)."""
