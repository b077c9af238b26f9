"""Kedro dataset for a folder of named tensors plus a JSON config (safetensors, atomic save).

In memory: {"config": dict, "tensors": dict[str, torch.Tensor]}. Used for the feature-based
NER cache (per-split word features) and the trained feature tagger.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io.core import AbstractDataset, DatasetError

from bert_pipeline.fsutil import atomic_directory

CONFIG, TENSORS = "config.json", "tensors.safetensors"


class TensorsDataset(AbstractDataset[dict, dict]):
    """Example catalog entry::

    ner_feature_cache:
      type: bert_pipeline.io.tensors_dataset.TensorsDataset
      path: data/05_model_input/ner_features
    """

    def __init__(self, path: str, metadata: dict[str, Any] | None = None):
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> dict:
        from safetensors.torch import load_file  # torch: only when a run reads tensors

        config = json.loads((self._path / CONFIG).read_text(encoding="utf-8"))
        return {"config": config, "tensors": load_file(self._path / TENSORS)}

    def save(self, data: dict) -> None:
        if set(data) != {"config", "tensors"}:
            raise DatasetError(
                f"{self._path}: expected {{'config': dict, 'tensors': dict}}, got {sorted(data)}"
            )
        from safetensors.torch import save_file

        with atomic_directory(self._path) as tmp:
            tensors = {k: v.contiguous() for k, v in data["tensors"].items()}
            save_file(tensors, tmp / TENSORS)
            (tmp / CONFIG).write_text(json.dumps(data["config"], indent=2), encoding="utf-8")

    def _exists(self) -> bool:
        return (self._path / TENSORS).is_file() and (self._path / CONFIG).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(PurePosixPath(self._path))}
