"""Filesystem helpers shared by the dataset and checkpoint writers."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Yields a temporary sibling folder that replaces `target` only if the block succeeds.

    A failed write leaves the previous `target` (or nothing) in place, never half a folder.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            try:
                os.replace(tmp, target)
            except OSError:
                os.replace(old, target)  # put the previous folder back
                raise
            shutil.rmtree(old)
        else:
            os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def recover_directory(target: str | Path) -> None:
    """Undoes what a killed `atomic_directory` left: puts the previous folder back if the kill
    fell between the two renames, and removes the temporary siblings."""
    target = Path(target)
    old = target.with_name(f".{target.name}.old")
    if old.is_dir() and not target.exists():
        os.replace(old, target)
    for leftover in target.parent.glob(f".{target.name}.*"):
        shutil.rmtree(leftover, ignore_errors=True)


@contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Yields a hidden sibling path that is renamed over `target` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
