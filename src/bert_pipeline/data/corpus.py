"""Reading raw corpora into a documents table and splitting documents into sentences.

Documents table: `doc_id` (unique str), `source` (file or dataset it came from), `text`, and
`layout`: "sentences" when the text already holds one sentence per line (google's format), else
"prose" (paragraphs separated by blank lines, possibly hard-wrapped).

A corpus is read as independent partitions of about `partition_size` bytes on disk
(`corpus_partitions` + `read_partition`), so Dask can read and split a corpus of any size piece by
piece: small files are read together (a task per 0.5 MB WikiExtractor file costs more in
scheduling and per-partition checks than its work), an uncompressed google-format file larger
than that is read in blocks cut at blank lines (documents never span one), so one big file is
read by all workers and never held whole by one;
`ingest_documents` reads them all into one table for small corpora and tests.
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import json
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bert_pipeline.params import ConfigError, parse_params, require

LAYOUT_SENTENCES = "sentences"
LAYOUT_PROSE = "prose"
SOURCE_KINDS = ("google_text", "prose_folder", "wikiextractor", "table", "hf_dataset")
DOCUMENT_COLUMNS = ["doc_id", "source", "text", "layout"]

_BLANK_LINES = re.compile(r"\n[ \t\f\v\r]*\n")
# control and invisible format characters (zero-width spaces, BOM, soft hyphen) carry no text
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad\u200b-\u200f\u2060\ufeff]")


class CorpusError(ValueError):
    """Bad raw input: the message names the file, row or parameter."""


@dataclass
class HfSource:
    """A Hugging Face `datasets` dataset: a hub name, or a builder such as "parquet" with
    `data_files`; `streaming` reads lazily so huge corpora need no local copy."""

    name: str | None = None
    config: str | None = None
    split: str = "train"
    data_files: Any = None  # a path, a list of paths or a split -> paths mapping
    streaming: bool = False
    text_column: str = "text"
    id_column: str | None = None


@dataclass
class CorpusSource:
    """The keys of the `pretrain_corpus` catalog entry (`CorpusDataset`)."""

    kind: str  # one of SOURCE_KINDS
    path: str | None = None
    glob: str | None = None
    document_delimiter: str | None = None
    skip_line_regex: str | None = None
    title_line: str = "drop"
    heading_lines: str = "drop"
    text_column: str = "text"
    id_column: str | None = None
    hf: HfSource = field(default_factory=HfSource)
    max_documents: int | None = None
    encoding_errors: str = "strict"
    partition_size: int | str = "2MiB"  # bytes of files on disk read as one partition

    def check(self, root: str) -> None:
        require(
            self.kind in SOURCE_KINDS, root, "kind", f"must be one of {SOURCE_KINDS}", self.kind
        )
        require(
            self.encoding_errors in ("strict", "replace"),
            root,
            "encoding_errors",
            "must be strict or replace",
            self.encoding_errors,
        )
        for name in ("title_line", "heading_lines"):
            require(
                getattr(self, name) in ("drop", "keep"),
                root,
                name,
                "must be drop or keep",
                getattr(self, name),
            )
        for name in ("document_delimiter", "skip_line_regex"):
            _compile(getattr(self, name), f"{root}.{name}")
        require(
            _size_bytes(self.partition_size) is not None,
            root,
            "partition_size",
            "must be a size such as 4MiB or a number of bytes, > 0",
            self.partition_size,
        )
        require(
            self.kind != "hf_dataset" or bool(self.hf.name),
            root,
            "hf.name",
            "must be set for kind hf_dataset",
            self.hf.name,
        )


def _size_bytes(size: int | str) -> int | None:
    from dask.utils import parse_bytes

    try:
        n = parse_bytes(size) if isinstance(size, str) else int(size)
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def corpus_source(source: Mapping[str, Any] | CorpusSource) -> CorpusSource:
    """The typed `pretrain_corpus` catalog entry; a bad key or value is a CorpusError naming it."""
    if isinstance(source, CorpusSource):
        return source
    try:
        return parse_params(CorpusSource, source, "pretrain_corpus")
    except ConfigError as exc:
        raise CorpusError(f"{exc} (the pretrain_corpus catalog entry)") from None


# whole-file decompression: gzip.decompress inflates in one call, not 8 KiB reads
_OPENERS = {".gz": gzip.decompress, ".bz2": bz2.decompress}


def read_bytes(path: Path) -> bytes:
    """Bytes of `path`, decompressed for .gz and .bz2; a damaged archive names the file."""
    decompress = _OPENERS.get(path.suffix)
    if decompress is None:
        return path.read_bytes()
    try:
        return decompress(path.read_bytes())
    except (OSError, EOFError, ValueError, zlib.error) as exc:  # bz2: ValueError when cut
        raise CorpusError(
            f"{path}: not a readable {path.suffix} file, truncated or corrupt ({exc})"
        ) from exc


def _stem(path: Path) -> Path:
    """`AA/wiki_00.gz` -> `AA/wiki_00`, `book.txt.bz2` -> `book`."""
    if path.suffix in _OPENERS:
        path = path.with_suffix("")
    return path.with_suffix("")


def read_text_file(path: Path, encoding_errors: str = "strict") -> str:
    """UTF-8 text of `path`; invalid bytes are an error naming the file unless `replace`."""
    return _decode(read_bytes(path), path, encoding_errors)


def _decode(data: bytes, path: Path, encoding_errors: str, offset: int = 0) -> str:
    """Text of `data`, read at byte `offset` of `path` (named with the file's byte on error)."""
    try:
        text = data.decode("utf-8", errors=encoding_errors)
    except UnicodeDecodeError as exc:
        at = offset + exc.start
        raise CorpusError(
            f"{path}: not valid UTF-8 (byte {at}: {data[exc.start : exc.start + 4]!r}); "
            "convert the file or set encoding_errors: replace on the pretrain_corpus catalog entry"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")


_DOCUMENT_BREAK = b"\n\n"  # a blank line: in google's format always between two documents


def _blocks(path: Path, block_size: int) -> list[tuple[int, int]]:
    """(offset, length) of the blocks of an uncompressed file; one block for a small or a
    compressed file (which cannot be read from the middle)."""
    size = path.stat().st_size
    if path.suffix in _OPENERS or size <= block_size:
        return [(0, size)]
    return [(at, min(block_size, size - at)) for at in range(0, size, block_size)]


def _read_block(path: Path, offset: int, length: int, encoding_errors: str) -> str:
    """The documents of one block: from the first blank line at or after `offset` (the start
    of the file for offset 0) to the first at or after `offset + length` (fsspec's read_block)."""
    from fsspec.utils import read_block

    with path.open("rb") as fh:
        data = read_block(fh, offset, length, delimiter=_DOCUMENT_BREAK)
        start = fh.tell() - len(data)  # where the block's first document begins
    return _decode(data, path, encoding_errors, start)


DEFAULT_GLOBS = {
    "google_text": ("*.txt", "*.txt.gz", "*.txt.bz2"),
    "prose_folder": ("*.txt", "*.txt.gz", "*.txt.bz2"),
    "wikiextractor": ("wiki_*",),
    "table": ("*.parquet", "*.jsonl", "*.jsonl.gz", "*.jsonl.bz2"),
}


def _files(path: Path, globs: tuple[str, ...]) -> list[tuple[Path, str]]:
    """(file, document-id stem) pairs; the stem keeps sub-folders (AA/wiki_00, AB/wiki_00)."""
    if not path.exists():
        raise CorpusError(
            f"corpus source {path} does not exist (pretrain_corpus.path in the catalog)"
        )
    if path.is_file():
        return [(path, _stem(path).name)]
    files = sorted({p for glob in globs for p in path.rglob(glob) if p.is_file()})
    if not files:
        raise CorpusError(f"corpus source {path} holds no files matching {list(globs)}")
    return [(p, _stem(p.relative_to(path)).as_posix()) for p in files]


def _google_documents(stem: str, text: str) -> Iterator[tuple[str, str]]:
    """google's format: one sentence per line, blank lines between documents."""
    for k, block in enumerate(_BLANK_LINES.split(text)):
        lines = [ln.strip() for ln in block.split("\n") if ln.strip()]
        if lines:
            yield f"{stem}:{k}", "\n".join(lines)


def _prose_documents(
    stem: str, text: str, delimiter: re.Pattern | None, skip: re.Pattern | None
) -> Iterator[tuple[str, str]]:
    """One document per file, or one per `delimiter` line (the delimiter line is dropped).

    `skip` lines (e.g. section headings) are dropped after delimiter detection.
    """
    k = 0
    current: list[str] = []
    for ln in text.split("\n"):
        if delimiter is not None and delimiter.search(ln):
            if any(x.strip() for x in current):
                yield f"{stem}:{k}", "\n".join(current)
                k += 1
            current = []
        elif skip is None or not skip.search(ln):
            current.append(ln)
    if any(x.strip() for x in current):
        yield (stem if delimiter is None else f"{stem}:{k}"), "\n".join(current)


_WIKI_OPEN = re.compile(r'<doc id="([^"]*)"[^>]*>')
_WIKI_TAG = re.compile(r"^(?:<doc [^\n]*|</doc>[^\S\n]*)$", re.M)  # a tag line, as a line
_NON_SPACE = re.compile(r"\S")
# a line that ends a sentence; WikiExtractor leaves section headings and list items without one
_SENTENCE_LINE = re.compile(r"^[^\n]*[.!?][\"'\u201d\u2019)\]]*[^\S\n]*$", re.M)


def _wikiextractor_articles(path: Path, text: str) -> Iterator[tuple[str, str]]:
    """(page id, the text between its tag lines) of every `<doc ...>` ... `</doc>` block.

    Counting the tags is not enough: a missing `</doc>` and a stray one later balance out and
    would merge two articles. So every `<doc>` must close before the next opens and no text may
    stand outside a doc; an error names the file, the line and the doc id. One regular
    expression finds the tag lines: a loop over every line was most of ingestion's time.
    """

    def line(pos: int) -> int:  # only for an error: counting lines is a pass over the text
        return text.count("\n", 0, pos) + 1

    def after_last() -> str:  # where a stray line sits: after which doc (id, opening line)
        if last is None:
            return "before the first <doc>; not WikiExtractor output?"
        return f"after doc id={last[0]!r} of line {line(last[1])}"

    def stray_text(start: int, end: int) -> None:
        if stray := _NON_SPACE.search(text, start, end):
            raise CorpusError(
                f"{path} line {line(stray.start())}: text outside any <doc> ({after_last()})"
            )

    doc_id, last, body = None, None, 0  # the open doc; the doc opened last; where text resumes
    for tag in _WIKI_TAG.finditer(text):
        at = tag.start()
        if tag.group().startswith("<doc "):
            opened = _WIKI_OPEN.fullmatch(tag.group().rstrip())
            if doc_id is None:
                stray_text(body, at)
            if opened is None:
                raise CorpusError(
                    f"{path} line {line(at)}: malformed <doc> tag {tag.group()[:80]!r}"
                )
            if doc_id is not None:
                raise CorpusError(
                    f"{path} line {line(at)}: <doc id={opened.group(1)!r}> opens before doc "
                    f"id={doc_id!r} (line {line(last[1])}) is closed: its </doc> is missing"
                )
            doc_id, last = opened.group(1), (opened.group(1), at)
        elif doc_id is None:
            stray_text(body, at)
            raise CorpusError(
                f"{path} line {line(at)}: </doc> without an open <doc> ({after_last()})"
            )
        else:
            yield doc_id, text[body:at]
            doc_id = None
        body = tag.end() + 1
    if doc_id is not None:
        raise CorpusError(
            f"{path}: doc id={doc_id!r} (line {line(last[1])}) has no </doc> (truncated?)"
        )
    stray_text(body, len(text))
    if last is None:
        raise CorpusError(f"{path}: no <doc> tag (not WikiExtractor output)")


def _wikiextractor_documents(
    path: Path, text: str, title_line: str, heading_lines: str
) -> Iterator[tuple[str, str]]:
    """WikiExtractor output: `<doc id=.. url=.. title=..>`, the title line, paragraphs, `</doc>`.

    Each article becomes one document with its paragraphs separated by blank lines; the doc_id is
    Wikipedia's page id. Headings and list items (lines that do not end a sentence) are dropped
    with `heading_lines: drop`, as google did for BERT's Wikipedia ("ignore lists, tables and
    headers"); empty articles are dropped by the caller.
    """
    for doc_id, body in _wikiextractor_articles(path, text):
        if title_line == "drop":
            body = body.partition("\n")[2]
        lines = _SENTENCE_LINE.findall(body) if heading_lines == "drop" else body.split("\n")
        yield doc_id, "\n\n".join(ln.strip() for ln in lines if ln.strip())


def _compile(pattern: str | None, name: str) -> re.Pattern | None:
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"parameter {name}={pattern!r} is not a regular expression: {exc}"
        ) from None


def _table_rows(
    path: Path, stem: str, text_column: str, id_column: str | None, errors: str
) -> Iterator[dict]:
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
        rows: Iterable[dict] = frame.to_dict("records")
    elif path.suffix in (".jsonl", ".json"):
        rows = _jsonl(path, errors)
    else:
        raise CorpusError(f"{path}: table sources must be .parquet or .jsonl files")
    for i, row in enumerate(rows):
        if text_column not in row:
            raise CorpusError(
                f"{path} row {i}: no column {text_column!r} (pretrain_corpus.text_column)"
            )
        doc_id = str(row[id_column]) if id_column else f"{stem}:{i}"
        yield {"doc_id": doc_id, "text": row[text_column], "row": i}


def _jsonl(path: Path, errors: str) -> Iterator[dict]:
    for i, line in enumerate(read_text_file(path, errors).split("\n")):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{path} line {i + 1}: invalid JSON ({exc.msg})") from exc


HF_ROWS_PER_PARTITION = 50_000


def _hf_dataset(spec: HfSource):
    import datasets

    return datasets.load_dataset(
        spec.name,
        spec.config,
        split=spec.split,
        data_files=spec.data_files,
        streaming=spec.streaming,
    )


def _hf_partitions(spec: HfSource) -> list[tuple[int, int]]:
    """(shard, shards) pairs: one per data file of a streamed dataset (`n_shards`), else
    contiguous blocks of HF_ROWS_PER_PARTITION rows."""
    ds = _hf_dataset(spec)
    if spec.streaming:
        n = ds.n_shards
    else:
        n = max(1, -(-len(ds) // HF_ROWS_PER_PARTITION))
    return [(i, n) for i in range(n)]


def _hf_rows(spec: HfSource, shard: int, shards: int) -> Iterator[dict]:
    """Rows of one shard; without an id_column a document is `<name/config/split>:<row>`,
    the row counted in the whole dataset, or within its file (`:<shard>:<row>`) when streamed
    from several files."""
    ds = _hf_dataset(spec)
    first = 0
    if shards > 1:
        if spec.streaming:
            ds = ds.shard(num_shards=shards, index=shard)
        else:
            div, mod = divmod(len(ds), shards)
            first = shard * div + min(shard, mod)
            ds = ds.shard(num_shards=shards, index=shard, contiguous=True)
    text_column, id_column = spec.text_column, spec.id_column
    prefix = "/".join(str(x) for x in (spec.name, spec.config, spec.split) if x)
    where = f"{prefix}:{shard}" if spec.streaming and shards > 1 else prefix
    for i, row in enumerate(ds, start=first):
        if text_column not in row:
            raise CorpusError(
                f"{where} row {i}: no column {text_column!r} (pretrain_corpus.text_column)"
            )
        doc_id = str(row[id_column]) if id_column else f"{where}:{i}"
        yield {"doc_id": doc_id, "text": row[text_column], "row": i, "source": prefix}


def _globs(source: CorpusSource) -> tuple[str, ...]:
    return (source.glob,) if source.glob else DEFAULT_GLOBS.get(source.kind, ())


def corpus_partitions(source: Mapping[str, Any] | CorpusSource) -> list[dict[str, Any]]:
    """The independent partitions of a corpus source, in corpus order: consecutive files (or
    blocks of a big google-format file) of about `partition_size` bytes on disk together, or the
    row blocks or data files of a `datasets` dataset. Each is the argument of `read_partition`."""
    source = corpus_source(source)
    if source.kind == "hf_dataset":
        return [{"source": source, "shard": i, "shards": n} for i, n in _hf_partitions(source.hf)]
    size = _size_bytes(source.partition_size) or 1
    parts, part, part_bytes = [], [], 0
    for path, stem in _files(Path(source.path or ""), _globs(source)):
        blocks = _blocks(path, size) if source.kind == "google_text" else [None]
        for block in blocks:
            nbytes = block[1] if block else path.stat().st_size
            if part and part_bytes + nbytes > size:
                parts.append({"source": source, "pieces": part})
                part, part_bytes = [], 0
            # documents of a file read in blocks are numbered per block: <stem>@<offset>:<k>
            piece_stem = stem if len(blocks) == 1 else f"{stem}@{block[0]}"
            part.append((str(path), piece_stem, block))
            part_bytes += nbytes
    if part:
        parts.append({"source": source, "pieces": part})
    return parts


def _partition_texts(part: dict[str, Any]) -> Iterator[tuple[str, str, Any, str, int | None]]:
    """(doc_id, source, text, layout, row) of every document of one partition, read lazily."""
    source: CorpusSource = part["source"]
    if source.kind == "hf_dataset":
        for r in _hf_rows(source.hf, part["shard"], part["shards"]):
            yield r["doc_id"], r["source"], r["text"], LAYOUT_PROSE, r["row"]
        return
    for path, stem, block in part["pieces"]:
        yield from _file_texts(source, Path(path), stem, block)


def _file_texts(source: CorpusSource, path: Path, stem: str, block: tuple[int, int] | None):
    """(doc_id, source, text, layout, row) of the documents of one file or block of a file."""
    kind, errors = source.kind, source.encoding_errors
    if kind == "table":
        for r in _table_rows(path, stem, source.text_column, source.id_column, errors):
            yield r["doc_id"], str(path), r["text"], LAYOUT_PROSE, r["row"]
        return
    text = read_text_file(path, errors) if block is None else _read_block(path, *block, errors)
    if kind == "google_text":
        docs, layout = _google_documents(stem, text), LAYOUT_SENTENCES
    elif kind == "wikiextractor":
        docs = _wikiextractor_documents(path, text, source.title_line, source.heading_lines)
        layout = LAYOUT_PROSE
    else:
        delimiter = _compile(source.document_delimiter, "pretrain_corpus.document_delimiter")
        skip = _compile(source.skip_line_regex, "pretrain_corpus.skip_line_regex")
        docs, layout = _prose_documents(stem, text, delimiter, skip), LAYOUT_PROSE
    for doc_id, doc_text in docs:
        yield doc_id, str(path), doc_text, layout, None


def _partition_documents(part: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The non-empty documents of one partition as documents-table rows, read lazily."""
    for doc_id, src, text, layout, row in _partition_texts(part):
        if not isinstance(text, str):
            at = f"{src} row {row}" if row is not None else src
            raise CorpusError(
                f"{at}: text of document {doc_id!r} is {type(text).__name__}, not str"
            )
        if text.strip():
            yield {"doc_id": doc_id, "source": src, "text": text, "layout": layout}


def read_partition(part: dict[str, Any]) -> pd.DataFrame:
    """The documents table of one partition (may be empty); a `datasets` partition stops at
    `max_documents`."""
    source: CorpusSource = part["source"]
    rows = _partition_documents(part)
    if source.kind == "hf_dataset" and source.max_documents:
        rows = itertools.islice(rows, source.max_documents)
    return pd.DataFrame.from_records(list(rows), columns=DOCUMENT_COLUMNS)


def _no_documents(source: CorpusSource) -> CorpusError:
    if source.kind == "hf_dataset":
        where = f"{source.hf.name} (hf_dataset, split {source.hf.split})"
    else:
        where = f"{source.path} ({source.kind}, files {list(_globs(source))})"
    return CorpusError(
        f"corpus source {where} yielded no non-empty documents (pretrain_corpus in the catalog)"
    )


def require_documents(source: Mapping[str, Any] | CorpusSource) -> None:
    """Refuses a corpus without one non-empty document, reading only up to the first one, so an
    empty corpus is named before any stage runs."""
    source = corpus_source(source)
    for part in corpus_partitions(source):
        if next(_partition_documents(part), None) is not None:
            return
    raise _no_documents(source)


def check_documents(frame: pd.DataFrame, source: CorpusSource) -> pd.DataFrame:
    """Corpus-wide checks: at least one document, unique doc_ids."""
    if frame.empty:
        raise _no_documents(source)
    dupes = frame["doc_id"][frame["doc_id"].duplicated()]
    if len(dupes):
        where = source.hf.name if source.kind == "hf_dataset" else source.path
        raise CorpusError(f"duplicate doc_id {dupes.iloc[0]!r} in {where}; set a unique id_column")
    return frame


def ingest_documents(source: Mapping[str, Any] | CorpusSource) -> pd.DataFrame:
    """Documents table from a corpus source (the keys of the `pretrain_corpus` catalog entry),
    read partition by partition in the calling process, up to `max_documents`."""
    source = corpus_source(source)
    max_docs = source.max_documents
    frames, n = [], 0
    for part in corpus_partitions(source):
        frames.append(read_partition(part))
        n += len(frames[-1])
        if max_docs and n >= max_docs:
            break
    frame = pd.concat(frames, ignore_index=True)
    if max_docs:
        frame = frame.head(int(max_docs))
    return check_documents(frame, source)


def paragraphs(text: str, layout: str) -> list[str]:
    """Whitespace-normalised units to split: lines ("sentences" layout) or unwrapped paragraphs."""
    if layout == LAYOUT_SENTENCES:
        units = text.split("\n")
    else:
        units = _BLANK_LINES.split(text)
    out = []
    for u in units:
        # runs of whitespace to one space: str.split() cuts at exactly the characters of
        # regex \s, in C and without a substitution per word
        u = " ".join(_INVISIBLE.sub("", u).split())
        if u:
            out.append(u)
    return out


def split_documents(
    documents: pd.DataFrame, language: str = "en", progress: bool = True
) -> pd.DataFrame:
    """Sentences table (doc_id, sentence_index, text) in document order.

    Prose paragraphs go through `sentencex` (Wikimedia's rule-based splitter: abbreviations,
    decimals, quotes, 240+ languages); google-format lines are sentences already.
    """
    from sentencex import segment
    from tqdm.auto import tqdm

    doc_col, idx_col, text_col = [], [], []
    rows = zip(documents["doc_id"], documents["text"], documents["layout"], strict=True)
    for doc_id, text, layout in tqdm(
        rows, total=len(documents), desc="split_sentences", unit="doc", disable=not progress
    ):
        k = 0
        for para in paragraphs(text, layout):
            pieces = [para] if layout == LAYOUT_SENTENCES else segment(language, para)
            for s in pieces:
                s = s.strip()
                if s:
                    doc_col.append(doc_id)
                    idx_col.append(k)
                    text_col.append(s)
                    k += 1
    if not text_col:
        raise CorpusError("no sentences left after cleaning: every document is empty")
    return pd.DataFrame({"doc_id": doc_col, "sentence_index": idx_col, "text": text_col}).astype(
        {"sentence_index": "int32"}
    )
