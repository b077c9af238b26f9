"""One run per folder: an exclusive lock that a second run is refused at once, in one line.

The lock is `fcntl.flock` on `<folder>/.run.lock`: the kernel drops it when its process dies,
so the lock of a killed run is stale by construction and the next run simply takes it. The file
holds the owner's pid, host, start time and command, for the refusal message.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

LOCK_FILE = ".run.lock"


class FolderInUseError(RuntimeError):
    """Another live run holds the folder."""


class RunLock:
    """Exclusive lock on a folder for the lifetime of a run (re-entrant within one process)."""

    _held: dict[Path, RunLock] = {}

    def __init__(self, folder: str | Path, what: str) -> None:
        self.folder = Path(folder).resolve()
        self.what = what  # e.g. "data_dir", named in the refusal
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> RunLock:
        held = RunLock._held.get(self.folder)
        if held is not None:  # this process already owns it (e.g. a node inside a locked run)
            held._depth += 1
            return held
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _describe(path)
            os.close(fd)
            raise FolderInUseError(
                f"{self.what} {self.folder} is in use by another run ({owner}); wait for it to "
                f"finish or use another {self.what}"
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(sys.argv)[:200],
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd, self._depth = fd, 1
        RunLock._held[self.folder] = self
        return self

    def release(self) -> None:
        self._depth -= 1
        if self._depth > 0 or self._fd is None:
            return
        RunLock._held.pop(self.folder, None)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        RunLock._held.get(self.folder, self).release()


def _describe(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {info['pid']} on {info['host']}, started {info['started']}: {info['command']}"
    except (OSError, ValueError, KeyError):
        return "owner unknown"
