"""Kedro dataset for a BERT tokenizer folder (tokenizer.json + vocab.txt).

In memory it is a `tokenizers.Tokenizer`; saves are atomic (written to a temporary sibling
folder, then renamed over the target) so a failed run never leaves half a tokenizer behind, and
a load first undoes what a killed save left (a `.tokenizer.old` put back or removed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io.core import AbstractDataset, DatasetError
from tokenizers import Tokenizer

from bert_pipeline.data.tokenizer import (
    TOKENIZER_FILE,
    VOCAB_FILE,
    load_tokenizer,
    save_tokenizer,
    special_token_ids,
)
from bert_pipeline.fsutil import atomic_directory, read_path, recover_directory, write_path


class TokenizerDataset(AbstractDataset[Tokenizer, Tokenizer]):
    """A tokenizer folder on the local filesystem.

    Example catalog entry::

        tokenizer:
          type: bert_pipeline.io.tokenizer_dataset.TokenizerDataset
          path: data/06_models/tokenizer
          lowercase: true   # only used when the folder has a vocab.txt and no tokenizer.json
    """

    def __init__(
        self, path: str, lowercase: bool = True, metadata: dict[str, Any] | None = None
    ) -> None:
        self._path = Path(path)
        self._lowercase = lowercase
        self.metadata = metadata

    def load(self) -> Tokenizer:
        path = read_path(self._path)
        recover_directory(path)
        return load_tokenizer(path, lowercase=self._lowercase)

    def save(self, data: Tokenizer) -> None:
        if not isinstance(data, Tokenizer):
            raise DatasetError(
                f"expected a tokenizers.Tokenizer for {self._path}, got {type(data)}"
            )
        special_token_ids(data, f"tokenizer to save at {self._path}")
        with atomic_directory(write_path(self._path)) as tmp:
            save_tokenizer(data, tmp)

    def _exists(self) -> bool:
        path = read_path(self._path)
        return (path / TOKENIZER_FILE).is_file() or (path / VOCAB_FILE).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "lowercase": self._lowercase}
