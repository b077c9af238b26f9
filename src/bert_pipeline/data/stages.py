"""The pretraining data stages as Dask graphs, partition by partition.

Ingestion reads the corpus in partitions of about `partition_size` bytes of files (small files
together, a big google-format file in blocks); sentence splitting maps over those partitions and
numbers documents globally (`doc_index`, the sentences' index, so the partitions have known
divisions); example creation regroups whole documents into shards of `documents_per_shard`
consecutive documents (Dask repartitions along the divisions: neighbouring partitions only, no
all-to-all shuffle) and builds each shard's examples on a worker. Nothing here holds the corpus
in one process; what a function returns to the caller is small (counts, a sentence sample).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask import delayed
from tokenizers import Tokenizer

from bert_pipeline.data.cluster import compute
from bert_pipeline.data.corpus import (
    DOCUMENT_COLUMNS,
    CorpusError,
    CorpusSource,
    corpus_partitions,
    corpus_source,
    ingest_documents,
    read_partition,
    split_documents,
)
from bert_pipeline.data.examples import (
    ExampleConfig,
    Vocab,
    build_corpus,
    create_examples,
    tokenize_sentences,
    vocab_from_tokenizer,
)
from bert_pipeline.data.stats import partial_statistics
from bert_pipeline.data.tokenizer import WordIds
from bert_pipeline.schemas.pretraining import check_examples_against_parameters

INDEX = "doc_index"
SENTENCE_META = pd.DataFrame(
    {
        "doc_id": pd.Series(dtype=object),
        "sentence_index": pd.Series(dtype="int32"),
        "text": pd.Series(dtype=object),
    },
    index=pd.Index([], dtype="int64", name=INDEX),
)


def documents_frame(source: Mapping[str, Any] | CorpusSource) -> dd.DataFrame:
    """The corpus as a lazy documents frame, one partition per `corpus_partitions` entry.

    With `max_documents` the files are read in order in this process until enough documents
    are found (a quick look at a big corpus must not read all of it).
    """
    source = corpus_source(source)
    if source.max_documents:
        frame = ingest_documents(source)
        return dd.from_pandas(frame, npartitions=1, sort=False)
    meta = pd.DataFrame({c: pd.Series(dtype=object) for c in DOCUMENT_COLUMNS})
    return dd.from_map(read_partition, corpus_partitions(source), meta=meta, label="read-corpus")


def _doc_id_hashes(doc_ids: pd.Series) -> np.ndarray:
    return pd.util.hash_pandas_object(doc_ids, index=False).to_numpy()


def _split_partition(frame: pd.DataFrame, first: int, language: str) -> pd.DataFrame:
    try:
        sentences = split_documents(frame, language=language, progress=False)
    except CorpusError:  # only blank documents here; an empty corpus is caught in shard_divisions
        return SENTENCE_META
    position = pd.Series(
        np.arange(first, first + len(frame), dtype=np.int64), index=frame["doc_id"]
    )
    sentences.index = pd.Index(position.loc[sentences["doc_id"]].to_numpy(), name=INDEX)
    return sentences


def _name_duplicate(documents: dd.DataFrame, key: np.uint64) -> None:
    """Finds the rows whose doc_id hashes to `key` (only they reach this process) and names them."""

    def rows(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.loc[_doc_id_hashes(frame["doc_id"]) == key, ["doc_id", "source"]]

    (found,) = compute("find duplicate doc_id", [documents.map_partitions(rows)])
    raise CorpusError(
        f"duplicate doc_id {found['doc_id'].iloc[0]!r} in {sorted(set(found['source']))}; "
        "doc_ids must be unique across the corpus (set a unique id_column)"
    )


def _census(frame: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """One read of a documents partition for the numbering, the duplicate check and the binary
    check: its doc_id hashes, and per source file its characters and the undecodable or NUL
    ones among them."""
    text = frame["text"]
    bad = text.str.count("\ufffd") + text.str.count("\x00")
    chars = pd.DataFrame({"source": frame["source"], "bad": bad, "chars": text.str.len()})
    return _doc_id_hashes(frame["doc_id"]), chars.groupby("source", as_index=False).sum()


def sentences_frame(documents: dd.DataFrame, language: str) -> tuple[dd.DataFrame, list[str]]:
    """Sentences (doc_id, sentence_index, text) indexed by the global document number, and one
    warning line per source file that looks binary (`binary_warnings`)."""
    census = compute("count documents", [delayed(_census)(p) for p in documents.to_delayed()])
    hashes = [h for h, _ in census]
    counts = np.array([len(h) for h in hashes], dtype=np.int64)
    if counts.sum() == 0:
        raise CorpusError("the corpus yielded no non-empty documents")
    every = np.sort(np.concatenate(hashes))
    repeated = every[1:][every[1:] == every[:-1]]
    if len(repeated):
        _name_duplicate(documents, repeated[0])
    starts = np.concatenate([[0], np.cumsum(counts)])
    parts, divisions = [], []
    for part, n, first in zip(documents.to_delayed(), counts, starts[:-1], strict=True):
        if n:
            parts.append(delayed(_split_partition)(part, int(first), language))
            divisions.append(int(first))
    divisions.append(int(starts[-1] - 1))
    sentences = dd.from_delayed(parts, meta=SENTENCE_META, divisions=divisions, verify_meta=False)
    return sentences, binary_warnings(pd.concat([c for _, c in census]))


def _sample(frame: pd.DataFrame, threshold: int, hash_key: str) -> pd.Series:
    keys = pd.util.hash_pandas_object(
        frame[["doc_id", "sentence_index"]], index=False, hash_key=hash_key
    ).to_numpy()
    return frame["text"][keys <= np.uint64(threshold)]


def sample_sentences(sentences: dd.DataFrame, sample_size: int, seed: int) -> list[str]:
    """A seeded sample of about `sample_size` sentences (all of a smaller corpus), corpus order.

    A sentence is in the sample when a seeded hash of (doc_id, sentence_index) falls below a
    threshold: the sample does not depend on the partitioning or the number of workers.
    """
    (total,) = compute("count sentences", [sentences.map_partitions(len).sum()])
    threshold = 2**64 - 1 if sample_size >= total else int(2**64 * sample_size / total)
    hash_key = f"{seed:016d}"[-16:]
    sampled = sentences.map_partitions(_sample, threshold, hash_key, meta=("text", object))
    (texts,) = compute("sample sentences", [sampled])
    return texts.tolist()


def shard_divisions(sentences: dd.DataFrame, documents_per_shard: int) -> list[int]:
    """Document-number boundaries of the example shards.

    Consecutive documents, `documents_per_shard` or a few more per shard, so no shard has a
    single document (next-sentence prediction draws B from another document of the shard).
    """
    if documents_per_shard < 2:
        raise ValueError(
            f"parameter pretrain_data.examples.documents_per_shard={documents_per_shard} must "
            "be >= 2: a random next segment comes from another document of the same shard"
        )
    unique = sentences[["sentence_index"]].map_partitions(  # read the index, not the text
        lambda f: pd.Series(f.index.unique(), dtype="int64"), meta=(INDEX, "int64")
    )
    # in this process: a read of one int64 column (~10 ms a million sentences) costs less than
    # the cluster's round trips for it
    (docs,) = dask.compute(unique, scheduler="sync")
    docs = docs.to_numpy()
    if not len(docs):
        raise CorpusError("no sentences left after cleaning: every document is empty")
    if len(docs) < 2:
        raise CorpusError(
            "the corpus has one document: next-sentence prediction needs a random next segment "
            "from a different document; supply at least 2 documents"
        )
    n_shards = max(1, len(docs) // documents_per_shard)
    starts = [int(docs[math.floor(k * len(docs) / n_shards)]) for k in range(n_shards)]
    return [*starts, int(docs[-1])]


@functools.lru_cache(maxsize=2)
def _worker_tokenizer(tokenizer_json: str) -> tuple[Tokenizer, Vocab, WordIds]:
    """Parsed once per worker process, not once per shard (parsing a 30k vocabulary costs as
    much as tokenizing a few hundred KB of text), with the ids of the words tokenized so far."""
    tokenizer = Tokenizer.from_str(tokenizer_json)
    return tokenizer, vocab_from_tokenizer(tokenizer), WordIds()


def _shard_examples(frame: pd.DataFrame, shard: int, tokenizer_json: str, cfg: ExampleConfig):
    tokenizer, vocab, known = _worker_tokenizer(tokenizer_json)
    tokens, lengths = tokenize_sentences(tokenizer, frame["text"].tolist(), known)
    corpus = build_corpus(
        frame["doc_id"].tolist(), frame["sentence_index"].to_numpy(), tokens, lengths
    )
    table = create_examples(corpus, cfg, vocab, shard=shard, progress=False)
    check_examples_against_parameters(table, cfg.max_seq_length, vocab.size)
    return table


def example_shards(
    sentences: dd.DataFrame, tokenizer: Tokenizer, cfg: ExampleConfig, documents_per_shard: int
) -> list[Any]:
    """One lazy Arrow table of examples per shard of documents."""
    divisions = shard_divisions(sentences, documents_per_shard)
    shards = sentences.repartition(divisions=divisions).to_delayed()
    tokenizer_json = delayed(tokenizer.to_str(), pure=True)
    return [
        delayed(_shard_examples, pure=True)(part, k, tokenizer_json, cfg)
        for k, part in enumerate(shards)
    ]


def shard_statistics(parts: list[Any], cfg: ExampleConfig, tokenizer: Tokenizer) -> list[Any]:
    """`partial_statistics` of every lazy shard, each computed where the shard is built."""
    vocab = delayed(vocab_from_tokenizer(tokenizer), pure=True)
    return [delayed(partial_statistics, pure=True)(part, cfg, vocab) for part in parts]


BINARY_SHARE = 0.01  # undecodable (U+FFFD) or NUL characters per character: not text


def binary_warnings(chars: pd.DataFrame) -> list[str]:
    """One warning line per source file whose text looks binary (read with encoding_errors:
    replace, it turns into replacement characters and NULs instead of failing); `chars` holds
    per source the characters and the bad ones, possibly in several rows."""
    totals = chars.groupby("source").sum()
    share = totals["bad"] / totals["chars"].clip(lower=1)
    return [
        f"{source}: {value:.0%} of its characters are undecodable bytes or NULs; it looks "
        "binary, not text (remove it from the corpus)"
        for source, value in share[share > BINARY_SHARE].items()
    ]
