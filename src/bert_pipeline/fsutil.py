"""Filesystem helpers shared by the dataset and checkpoint writers."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

# Targets whose saves go to their staging sibling: the outputs of the data run now in progress
# in this process (`StagedSet.open`), read back from there by its later nodes.
_STAGED: set[str] = set()


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
    fell between the two renames, and removes the temporary siblings.

    The staging sibling of a data run stays: only `StagedSet.recover` knows whether it is to
    be swapped in (its commit had begun) or dropped."""
    target = Path(target)
    old = target.with_name(f".{target.name}.old")
    if old.is_dir() and not target.exists():
        os.replace(old, target)
    staging = staged_path(target).parent
    for leftover in target.parent.glob(f".{target.name}.*"):
        if leftover != staging:
            _remove(leftover)


def _remove(path: Path) -> None:
    """Removes a file or a folder tree, if there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def temporary_sibling(target: str | Path) -> Path:
    """The hidden name a file is written under before it is renamed over `target`."""
    target = Path(target)
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


def remove_killed_writes(folder: str | Path, name_glob: str) -> None:
    """Removes the `temporary_sibling`s of files matching `name_glob` in `folder` that a killed
    write left; only the folder's owner may call it (a live writer's file would go too)."""
    for path in Path(folder).glob(f".{name_glob}.*.tmp"):
        path.unlink(missing_ok=True)


@contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Yields a hidden sibling path that is renamed over `target` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(target)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def staged_path(target: str | Path) -> Path:
    """Where a data run stages `target`: same name (an MLflow artifact logged from it keeps its
    name) in a hidden sibling folder on the same filesystem (the commit is a rename)."""
    target = Path(target)
    return target.parent / f".{target.name}.staged" / target.name


def write_path(target: str | Path) -> Path:
    """Where a dataset saves `target`: its staging path while a data run stages it."""
    return staged_path(target) if os.path.abspath(target) in _STAGED else Path(target)


def read_path(target: str | Path) -> Path:
    """Where a dataset reads `target`: what this run staged, else the committed one."""
    staged = staged_path(target)
    if os.path.abspath(target) in _STAGED and staged.exists():
        return staged
    return Path(target)


class StagedSet:
    """Outputs that are committed together or not at all (the files and folders of a data run).

    While open, saves of the targets go to their staging siblings (`write_path`) and the run's
    later nodes read them there (`read_path`). `commit` writes a journal naming the staged
    targets before the first rename and removes it after the last, so `recover` rolls a commit
    cut short forward; without a journal, staged outputs belong to a run that did not finish
    and are dropped. Readers never see half a set, and a failed run leaves the previous one.
    """

    def __init__(self, targets: Iterable[str | Path], journal: str | Path) -> None:
        self.targets = sorted(Path(os.path.abspath(t)) for t in targets)
        self.journal = Path(journal)

    def open(self) -> None:
        """Recovers what an earlier run left, then stages every target."""
        self.recover()
        _STAGED.update(str(t) for t in self.targets)

    def close(self) -> None:
        _STAGED.difference_update(str(t) for t in self.targets)

    def commit(self) -> None:
        """Swaps every staged target in, behind the journal; closes the set."""
        self.close()
        staged = [str(t) for t in self.targets if staged_path(t).exists()]
        with atomic_file(self.journal) as tmp:
            tmp.write_text(json.dumps(staged), encoding="utf-8")
        self.recover()

    def discard(self) -> None:
        """Closes the set after a failure: a commit under way still completes, the rest goes."""
        self.close()
        self.recover()

    def recover(self) -> None:
        """Completes a journaled commit, then drops staged leftovers and half swaps."""
        if self.journal.is_file():
            for target in json.loads(self.journal.read_text(encoding="utf-8")):
                swap_in(Path(target))
            self.journal.unlink()
        for target in self.targets:
            _remove(staged_path(target).parent)
            recover_directory(target)


def swap_in(target: Path) -> None:
    """Renames the staged `target` over the committed one; a no-op when done already, so a
    commit cut short at any point completes when run again."""
    staged = staged_path(target)
    old = target.with_name(f".{target.name}.old")
    if staged.exists():
        if target.is_dir():  # a folder cannot be renamed over a folder: move it aside first
            _remove(old)
            os.replace(target, old)
        os.replace(staged, target)
    _remove(staged.parent)
    _remove(old)
