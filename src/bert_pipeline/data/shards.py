"""Pretraining examples as shards of Arrow IPC files plus a manifest.

Arrow IPC (uncompressed) is memory-mapped on load: a training process reads the rows it batches
and never holds the whole table, whatever the corpus size; every rank maps the same files. The
manifest records what made the examples (tokenizer fingerprint, parameters, rows per shard), so
`pretrain_model` refuses examples that do not belong to its tokenizer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

MANIFEST_FILE = "manifest.json"
SHARD_SUFFIX = ".arrow"


def tokenizer_fingerprint(tokenizer) -> str:
    """sha256 of the tokenizer's JSON (vocabulary, normalizer, special tokens)."""
    return hashlib.sha256(tokenizer.to_str().encode("utf-8")).hexdigest()


def shard_name(k: int) -> str:
    return f"part-{k:05d}{SHARD_SUFFIX}"


def write_shard(table: pa.Table, path: str | Path) -> int:
    """Writes one shard; returns its row count."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=65_536)
    return table.num_rows


def read_shard(path: str | Path) -> pa.Table:
    """A memory-mapped shard: no copy of the data is made."""
    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()


@dataclass
class ExampleShards:
    """Examples of a data run: `parts` are lazy tables (Dask delayed objects) before saving,
    shard file paths after loading; `manifest` says what made them."""

    parts: list[Any]
    manifest: dict[str, Any] = field(default_factory=dict)

    def paths(self) -> list[Path]:
        return [Path(p) for p in self.parts]

    def table(self) -> pa.Table:
        """All shards as one memory-mapped table (one chunk list per shard, nothing copied)."""
        tables = [read_shard(p) for p in self.paths()]
        if not tables:
            raise ValueError("the examples folder holds no shards: nothing to train on")
        return pa.concat_tables(tables)

    def check_tokenizer(self, tokenizer, where: str = "pretraining_examples") -> None:
        """One-line refusal when the examples were made with another tokenizer."""
        made_with = self.manifest.get("tokenizer_sha256")
        current = tokenizer_fingerprint(tokenizer)
        if made_with != current:
            raise ValueError(
                f"{where} were made with tokenizer sha256 {str(made_with)[:12]}, but the tokenizer "
                f"is {current[:12]}: the last pretrain_data run did not finish; rerun "
                "`kedro run --pipeline pretrain_data`"
            )


def load_example_shards(folder: str | Path) -> ExampleShards:
    """The shards of a complete examples folder (after undoing a killed save's leftovers)."""
    from bert_pipeline.fsutil import recover_directory

    folder = Path(folder)
    recover_directory(folder)
    if not (folder / MANIFEST_FILE).is_file():
        raise FileNotFoundError(
            f"{folder} holds no {MANIFEST_FILE}: not a complete pretrain_data output; "
            "run `kedro run --pipeline pretrain_data`"
        )
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    return ExampleShards(parts=[folder / s["file"] for s in manifest["shards"]], manifest=manifest)
