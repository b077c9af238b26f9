"""CoNLL-2003 files to sentence tables and back.

A file holds one token per line (`word POS chunk NER`: the word first, the tag last), a blank
line after each sentence and `-DOCSTART-` lines between documents. The table has one row per
sentence: split, doc (document index), sentence (index in the split), tokens, tags. Tags are
kept in IOB2 (B- opens every entity); IOB1 files (B- only between adjacent entities of one
type, as CoNLL-2003 originally ships) are converted on reading and back on writing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

DOCSTART = "-DOCSTART-"
SCHEMES = ("IOB1", "IOB2")
COLUMNS = ["split", "doc", "sentence", "tokens", "tags"]


class NerDataError(ValueError):
    """A CoNLL file or NER table that cannot be read; the message names the file and line."""


def _opens_with_inside(previous: str, tag: str) -> bool:
    """An I-X after O or another type: it opens an entity (IOB1's way, never IOB2's)."""
    return tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:])


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """An I-X that opens an entity (after O or another type) becomes B-X."""
    out, previous = [], "O"
    for tag in tags:
        if _opens_with_inside(previous, tag):
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def iob2_to_iob1(tags: Sequence[str]) -> list[str]:
    """A B-X stays B-X only right after an X entity (where I-X would merge the two)."""
    out, previous = [], "O"
    for tag in tags:
        if tag.startswith("B-") and (previous == "O" or previous[2:] != tag[2:]):
            out.append("I-" + tag[2:])
        else:
            out.append(tag)
        previous = tag
    return out


def _check_tag(tag: str, labels: set[str], where: str) -> None:
    if tag not in labels:
        raise NerDataError(f"{where}: unknown tag {tag!r} (labels: {', '.join(sorted(labels))})")


def parse_conll(
    lines: Iterable[str], split: str, labels: Sequence[str], scheme: str, source: str
) -> pd.DataFrame:
    """The sentences of a CoNLL file's lines; errors name `source:line`."""
    if scheme not in SCHEMES:
        raise NerDataError(f"tag scheme {scheme!r} is not one of {SCHEMES}")
    known = set(labels)
    rows, tokens, tags = [], [], []
    doc, columns = 0, None

    def flush() -> None:
        if tokens:
            fixed = iob1_to_iob2(tags) if scheme == "IOB1" else list(tags)
            rows.append((split, doc, len(rows), list(tokens), fixed))
            tokens.clear()
            tags.clear()

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n").rstrip("\r")
        where = f"{source}:{number}"
        if not line.strip():
            flush()
            continue
        parts = line.split()
        if parts[0] == DOCSTART:
            flush()
            doc += bool(rows)
            continue
        if columns is None:
            if len(parts) < 2:
                raise NerDataError(f"{where}: expected a word and a tag, got {line!r}")
            columns = len(parts)
        if len(parts) != columns:
            raise NerDataError(
                f"{where}: expected {columns} columns as the file's first line, got "
                f"{len(parts)}: {line!r}"
            )
        _check_tag(parts[-1], known, where)
        if scheme == "IOB2" and _opens_with_inside(tags[-1] if tags else "O", parts[-1]):
            raise NerDataError(
                f"{where}: {parts[-1]} after {tags[-1] if tags else 'the sentence start'} is not "
                "IOB2 (B- opens every entity): for an IOB1 file set conll_scheme=IOB1"
            )
        tokens.append(parts[0])
        tags.append(parts[-1])
    flush()
    if not rows:
        raise NerDataError(f"{source}: no sentences")
    return pd.DataFrame(rows, columns=COLUMNS)


def read_conll(
    path: str | Path, split: str, labels: Sequence[str], scheme: str = "IOB2"
) -> pd.DataFrame:
    """One CoNLL file as a sentence table (see `parse_conll`)."""
    path = Path(path)
    if not path.is_file():
        raise NerDataError(f"missing CoNLL file {path}")
    with path.open(encoding="utf-8") as handle:
        return parse_conll(handle, split, labels, scheme, str(path))


def write_conll(frame: pd.DataFrame, predictions: Sequence[Sequence[str]], scheme: str) -> str:
    """`word gold predicted` lines in the file's scheme, a blank line after each sentence and
    `-DOCSTART-` between documents: the input of CoNLL's conlleval script."""
    if len(frame) != len(predictions):
        raise ValueError(f"{len(predictions)} predicted sentences for {len(frame)} sentences")
    convert = iob2_to_iob1 if scheme == "IOB1" else list
    out, doc = [], None
    for tokens, tags, pred, d in zip(
        frame["tokens"], frame["tags"], predictions, frame["doc"], strict=True
    ):
        if d != doc:
            out.append(f"{DOCSTART} O O\n")
            doc = d
        for word, gold, guess in zip(tokens, convert(tags), convert(pred), strict=True):
            out.append(f"{word} {gold} {guess}")
        out.append("")
    return "\n".join(out) + "\n"


def table_from_hf(frame: pd.DataFrame, split: str, labels: Sequence[str], source: str):
    """A `datasets` CoNLL-2003 split (tokens, ner_tags as class ids in `labels`' order) as a
    sentence table; `-DOCSTART-` rows become document boundaries."""
    for column in ("tokens", "ner_tags"):
        if column not in frame.columns:
            raise NerDataError(f"{source}: no column {column!r} (columns: {list(frame.columns)})")
    rows, doc = [], 0
    for i, (tokens, ids) in enumerate(zip(frame["tokens"], frame["ner_tags"], strict=True)):
        tokens = list(tokens)
        if tokens and tokens[0] == DOCSTART:
            doc += bool(rows)
            continue
        if not tokens:
            continue
        bad = [t for t in ids if not 0 <= int(t) < len(labels)]
        if bad:
            raise NerDataError(f"{source} row {i}: tag id {bad[0]} outside labels {list(labels)}")
        rows.append((split, doc, len(rows), tokens, [labels[int(t)] for t in ids]))
    if not rows:
        raise NerDataError(f"{source}: no sentences")
    return pd.DataFrame(rows, columns=COLUMNS)
