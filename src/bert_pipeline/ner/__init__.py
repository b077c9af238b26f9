"""Named-entity recognition (CoNLL-2003): reading, WordPiece alignment, fine-tuning and the
feature-based tagger of the BERT paper (no Kedro)."""
