"""One route to a split through `datasets`: from the hub, or from local Parquet files laid out as
the hub stores them (`<data_dir>/<split>-*.parquet`), for machines without the hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_split(
    path: str,
    split: str,
    *,
    config: str | None = None,
    data_dir: str | Path | None = None,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
) -> tuple[Any, str]:
    """The `datasets.Dataset` of one split and a description of where it came from.

    Raises FileNotFoundError naming the pattern and folder when `data_dir` has no such files.
    """
    import datasets

    if data_dir is None:
        ds = datasets.load_dataset(
            path, config, split=split, revision=revision, cache_dir=cache_dir
        )
        return ds, f"{path}{'/' + config if config else ''}:{split}"
    files = sorted(str(p) for p in Path(data_dir).glob(f"{split}-*.parquet"))
    if not files:
        raise FileNotFoundError(f"no {split}-*.parquet in {data_dir}")
    ds = datasets.load_dataset(
        "parquet", data_files={split: files}, split=split, cache_dir=cache_dir
    )
    return ds, f"{data_dir}/{split}-*.parquet"
