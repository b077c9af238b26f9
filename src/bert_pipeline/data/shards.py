"""Pretraining examples as shards of Arrow IPC files plus a manifest.

Arrow IPC (uncompressed) is memory-mapped on load: a training process reads the rows it batches
and never holds the whole table, whatever the corpus size; every rank maps the same files. The
manifest records what made the examples (tokenizer fingerprint, parameters, rows per shard), so
`pretrain_model` refuses examples that do not belong to its tokenizer and takes their NSP,
length and masking settings from it.
"""

from __future__ import annotations

import hashlib
import json
import mmap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

MANIFEST_FILE = "manifest.json"
SHARD_SUFFIX = ".arrow"
RERUN = "`kedro run --pipeline pretrain_data`"
MISMATCH = f"the examples are damaged or were changed after they were written; rerun {RERUN}"


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


def read_shard(path: str | Path, maps: list[mmap.mmap] | None = None) -> pa.Table:
    """A memory-mapped shard: no copy of the data is made (the map is added to `maps`)."""
    with open(path, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if maps is not None:
        maps.append(mapped)
    return pa.ipc.open_file(pa.BufferReader(pa.py_buffer(mapped))).read_all()


@dataclass
class ExampleShards:
    """Examples of a data run: `parts` are lazy tables (Dask delayed objects) before saving,
    shard file paths after loading; `manifest` says what made them. `statistics` are each
    shard's counts for the report (`data.stats.partial_statistics`): lazy beside the parts, so
    the worker that builds a shard counts it while it holds it, and read from the manifest
    after loading."""

    parts: list[Any]
    manifest: dict[str, Any] = field(default_factory=dict)
    statistics: list[Any] = field(default_factory=list)
    _maps: list[mmap.mmap] = field(default_factory=list, repr=False)

    def paths(self) -> list[Path]:
        return [Path(p) for p in self.parts]

    def table(self) -> pa.Table:
        """All shards as one memory-mapped table (one chunk list per shard, nothing copied)."""
        tables = [read_shard(p, self._maps) for p in self.paths()]
        if not tables:
            raise ValueError("the examples folder holds no shards: nothing to train on")
        return pa.concat_tables(tables)

    def release_pages(self) -> None:
        """Unmaps the pages read so far (they stay in the page cache and fault back in on use).

        Training reads scattered rows, and the kernel maps up to 64 KB of cached neighbours with
        every page it faults in: without this the process's resident set would grow towards the
        size of the examples, step after step.
        """
        for mapped in self._maps:
            mapped.madvise(mmap.MADV_DONTNEED)

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

    def check_statistics(self, statistics: dict[str, Any], where: str) -> None:
        """One-line refusal when `statistics` describe other examples (another data run)."""
        described = statistics.get("examples_generation")
        if described != self.manifest.get("generation"):
            raise ValueError(
                f"{where} describes examples generation {str(described)[:12]}, but "
                f"pretraining_examples are generation {str(self.manifest.get('generation'))[:12]}"
                f": they come from different pretrain_data runs; rerun {RERUN}"
            )

    def made_with(self, *keys: str, where: str = "pretraining_examples") -> dict[str, Any]:
        """The pretrain_data.examples settings that made these examples, from the manifest.

        The model side reads NSP, the sequence length and the dynamic-masking rate from here
        rather than restating them in its own parameters: Kedro resolves each environment's
        interpolations before merging, so an environment that overrode pretrain_data alone
        left a `${pretrain_data...}` copy on the model side at base's value.
        """
        made = self.manifest.get("parameters") or {}
        missing = [key for key in keys if key not in made]
        if missing:
            raise ValueError(
                f"{where}/{MANIFEST_FILE} does not record pretrain_data.examples."
                f"{missing[0]}: rebuild the examples with `kedro run --pipeline pretrain_data`"
            )
        return {key: made[key] for key in keys}


def load_example_shards(folder: str | Path) -> ExampleShards:
    """The shards of a complete examples folder (after undoing a killed save's leftovers), the
    manifest checked against them."""
    from bert_pipeline.fsutil import recover_directory

    folder = Path(folder)
    recover_directory(folder)
    if not (folder / MANIFEST_FILE).is_file():
        raise FileNotFoundError(
            f"{folder} holds no {MANIFEST_FILE}: not a complete pretrain_data output; "
            "run `kedro run --pipeline pretrain_data`"
        )
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    check_manifest(folder, manifest)
    shards = manifest["shards"]
    return ExampleShards(
        parts=[folder / s["file"] for s in shards],
        manifest=manifest,
        statistics=[s["statistics"] for s in shards if "statistics" in s],
    )


def check_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Refuses, in one line naming the file, a manifest that does not describe the shards beside
    it: its row counts and byte sizes must be the files' own (sizes from the file system, rows
    from each Arrow file's footer and batch headers; no data is read)."""
    where = folder / MANIFEST_FILE
    missing = [k for k in ("generation", "n_examples", "shards") if k not in manifest]
    if missing or any("bytes" not in s for s in manifest["shards"]):
        raise ValueError(
            f"{where} does not record {(missing or ['the shard sizes'])[0]}: written by an older "
            f"version; rebuild the examples with {RERUN}"
        )
    total = 0
    for shard in manifest["shards"]:
        path = folder / shard["file"]
        rows = shard_rows(path, shard["bytes"])
        if rows != shard["rows"]:
            raise ValueError(
                f"{where} says {shard['file']} holds {shard['rows']} rows, it holds {rows}: "
                f"{MISMATCH}"
            )
        total += rows
    if total != manifest["n_examples"]:
        raise ValueError(
            f"{where} says n_examples={manifest['n_examples']}, the shards hold {total} rows: "
            f"{MISMATCH}"
        )


def shard_rows(path: Path, size: int) -> int:
    """The rows of one shard from its Arrow metadata, refused in one line when the file is not
    the `size` bytes the manifest recorded or not a whole Arrow IPC file (truncated, damaged)."""
    if not path.is_file():
        raise ValueError(f"{path} is missing: {MISMATCH}")
    found = path.stat().st_size
    if found != size:
        raise ValueError(f"{path} has {found} bytes, the manifest recorded {size}: {MISMATCH}")
    try:
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            return sum(reader.get_batch(k).num_rows for k in range(reader.num_record_batches))
    except (OSError, pa.ArrowException) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(
            f"{path} is not a readable Arrow IPC file ({reason}): {MISMATCH}"
        ) from None
