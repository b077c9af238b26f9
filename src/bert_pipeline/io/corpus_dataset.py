"""Kedro dataset for the raw pretraining corpus: text files, tables or a `datasets` dataset.

Loading returns the documents table (doc_id, source, text, layout) as a lazy Dask frame, a
partition per `partition_size` bytes of files (`bert_pipeline.data.stages.documents_frame`),
after reading just enough of the source to know it holds a document (an empty corpus is named by
its path here, not found empty stages later); the source is described by the catalog entry, so
the raw data shows up in the catalog and in kedro-viz like any other dataset. Read-only.
"""

from __future__ import annotations

from typing import Any

import dask.dataframe as dd
from kedro.io.core import AbstractDataset, DatasetError

from bert_pipeline.data.corpus import require_documents
from bert_pipeline.data.stages import documents_frame


class CorpusDataset(AbstractDataset[None, dd.DataFrame]):
    """A raw text corpus.

    Example catalog entry (the keys are those of `ingest_documents`)::

        pretrain_corpus:
          type: bert_pipeline.io.corpus_dataset.CorpusDataset
          kind: prose_folder   # prose_folder | google_text | wikiextractor | table | hf_dataset
          path: data/01_raw/sample_corpus
          document_delimiter: null    # prose_folder: regex of lines that start a document
          hf: {name: wikimedia/wikipedia, config: 20231101.en, streaming: true}  # hf_dataset
          max_documents: null
    """

    def __init__(
        self,
        kind: str,
        path: str | None = None,
        glob: str | None = None,
        document_delimiter: str | None = None,
        skip_line_regex: str | None = None,
        title_line: str = "drop",
        heading_lines: str = "drop",
        text_column: str = "text",
        id_column: str | None = None,
        hf: dict[str, Any] | None = None,
        max_documents: int | None = None,
        encoding_errors: str = "strict",
        partition_size: int | str = "2MiB",
        metadata: dict[str, Any] | None = None,
    ):
        self._source = {
            "kind": kind,
            "path": path,
            "glob": glob,
            "document_delimiter": document_delimiter,
            "skip_line_regex": skip_line_regex,
            "title_line": title_line,
            "heading_lines": heading_lines,
            "text_column": text_column,
            "id_column": id_column,
            "hf": dict(hf or {}),
            "max_documents": max_documents,
            "encoding_errors": encoding_errors,
            "partition_size": partition_size,
        }
        self.metadata = metadata

    def load(self) -> dd.DataFrame:
        require_documents(self._source)
        return documents_frame(self._source)

    def save(self, data: None) -> None:
        raise DatasetError("CorpusDataset is read-only: it is the raw input of pretrain_data")

    def _describe(self) -> dict[str, Any]:
        keys = ("kind", "path", "glob", "max_documents")
        described = {k: self._source[k] for k in keys if self._source[k] is not None}
        if self._source["kind"] == "hf_dataset":
            described["hf"] = self._source["hf"]
        return described
