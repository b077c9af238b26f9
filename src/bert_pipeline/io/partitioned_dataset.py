"""PartitionedDataset whose save replaces the folder only once every partition is written.

Kedro's own save with `overwrite: true` deletes the folder, then writes the partitions one by
one: a failure halfway (a bad shard, a full disk, Ctrl-C) leaves some shards that the next run
would load as if they were the whole dataset. Here a local save goes to a temporary sibling
folder that is renamed over the target at the end, so the old folder (or none) survives.
"""

from __future__ import annotations

from typing import Any

from kedro_datasets.partitions import PartitionedDataset

from bert_pipeline.fsutil import atomic_directory


class AtomicPartitionedDataset(PartitionedDataset):
    """`partitions.PartitionedDataset` with all-or-nothing saves on the local filesystem.

    Remote paths, and `overwrite: false` (which adds to the existing partitions), save as
    PartitionedDataset does.
    """

    def save(self, data: dict[str, Any]) -> None:
        if self._protocol != "file" or not self._overwrite:
            super().save(data)
            return
        target = self._filesystem._strip_protocol(self._normalized_path)
        with atomic_directory(target) as tmp:
            final_path = self._path
            self._path = str(tmp)
            try:
                super().save(data)
            finally:
                self._path = final_path
        self._invalidate_caches()
