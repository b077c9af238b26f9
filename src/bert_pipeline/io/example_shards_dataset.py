"""Kedro dataset for the pretraining examples: Arrow IPC shards + manifest, all or nothing.

Saving computes every shard on the current Dask client straight into a temporary sibling folder
(each worker writes its own shards), adds the manifest, and swaps the folder in; a failed or
killed run leaves the previous complete set. Loading checks the manifest against the shards
(`data.shards.load_example_shards`) and returns `ExampleShards` whose `table()` is
memory-mapped.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from dask import delayed
from kedro.io.core import AbstractDataset, DatasetError

from bert_pipeline.data.cluster import compute
from bert_pipeline.data.shards import (
    MANIFEST_FILE,
    ExampleShards,
    load_example_shards,
    shard_name,
    write_shard,
)
from bert_pipeline.fsutil import atomic_directory, read_path, recover_directory, write_path


class ExampleShardsDataset(AbstractDataset[ExampleShards, ExampleShards]):
    """A folder `part-00000.arrow ...` + `manifest.json`.

    Example catalog entry::

        pretraining_examples:
          type: bert_pipeline.io.example_shards_dataset.ExampleShardsDataset
          path: data/05_model_input/pretraining_examples
    """

    def __init__(self, path: str, metadata: dict[str, Any] | None = None) -> None:
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> ExampleShards:
        try:
            return load_example_shards(read_path(self._path))
        except (FileNotFoundError, ValueError) as exc:
            raise DatasetError(str(exc)) from None

    def save(self, data: ExampleShards) -> None:
        """Writes the shards, then the manifest: rows, bytes and statistics per shard, and a new
        `generation` id that the statistics report of these examples repeats."""
        if not isinstance(data, ExampleShards) or not data.parts:
            raise DatasetError(f"expected ExampleShards with at least one shard for {self._path}")
        if data.statistics and len(data.statistics) != len(data.parts):
            raise DatasetError(
                f"{len(data.statistics)} statistics for {len(data.parts)} shards for {self._path}"
            )
        path = write_path(self._path)
        recover_directory(path)
        with atomic_directory(path) as tmp:
            names = [shard_name(k) for k in range(len(data.parts))]
            writes = [
                delayed(write_shard)(part, tmp / name)
                for part, name in zip(data.parts, names, strict=True)
            ]
            # one compute: each shard's table is built once, for its file and its statistics
            done = compute("create_examples", [*writes, *data.statistics], names=names + names)
            rows, statistics = done[: len(names)], done[len(names) :]
            shards = [
                {"file": n, "rows": int(r), "bytes": (tmp / n).stat().st_size}
                for n, r in zip(names, rows, strict=True)
            ]
            for shard, counts in zip(shards, statistics, strict=False):
                shard["statistics"] = counts
            manifest = {
                **data.manifest,
                "generation": uuid.uuid4().hex,
                "n_examples": sum(rows),
                "shards": shards,
            }
            (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2), encoding="utf-8")

    def _exists(self) -> bool:
        return (read_path(self._path) / MANIFEST_FILE).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}
