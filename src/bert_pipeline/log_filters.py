"""Logging filters for conf/logging.yml: what the console leaves out of third-party output."""

from __future__ import annotations

import logging
from collections.abc import Iterable


class DropMessages(logging.Filter):
    """Drops records whose message starts with one of `prefixes` (advertisements, not problems)."""

    def __init__(self, prefixes: Iterable[str]):
        super().__init__()
        self.prefixes = tuple(prefixes)

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)
