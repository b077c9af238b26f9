"""Corpus ingestion (every source kind) and sentence splitting, with their errors."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from bert_pipeline.data.corpus import (
    CorpusError,
    corpus_partitions,
    ingest_documents,
    paragraphs,
    split_documents,
)
from bert_pipeline.schemas.pretraining import DocumentsSchema, SentencesSchema
from tests.data.conftest import write_wikiextractor


def test_prose_folder_one_document_per_file(prose_folder: Path):
    docs = ingest_documents({"kind": "prose_folder", "path": str(prose_folder)})
    DocumentsSchema.validate(docs)
    assert len(docs) == 8 and docs["doc_id"].iloc[0] == "00_river"
    sentences = split_documents(docs)
    SentencesSchema.validate(sentences)
    first = sentences[sentences["doc_id"] == "00_river"]["text"].tolist()
    # hard-wrapped lines are joined; "Mr." and "0.5" do not end sentences
    assert first[0] == "The river changed slowly during season number 0."
    assert first[1] == "Mr. Brown measured it with a rod of 0.5 metres, and wrote the result down."
    assert len(first) == 4 * 6
    assert sentences["sentence_index"].tolist()[:3] == [0, 1, 2]


def test_paragraphs_are_never_joined(tmp_path: Path):
    (tmp_path / "a.txt").write_text(
        "A heading\n\nThe first line\ncontinues here.\n", encoding="utf-8"
    )
    (tmp_path / "b.txt").write_text("Other.\n", encoding="utf-8")
    sentences = split_documents(ingest_documents({"kind": "prose_folder", "path": str(tmp_path)}))
    assert sentences["text"].tolist() == ["A heading", "The first line continues here.", "Other."]


def test_document_delimiter_wikitext_style(tmp_path: Path):
    text = (
        " \n = First Title = \n \n Alpha one . Alpha two .\n"
        " \n = = Section = = \n \n Alpha three .\n"
        " \n = Second Title = \n \n Beta one .\n"
    )
    (tmp_path / "wiki.raw").write_text(text, encoding="utf-8")
    docs = ingest_documents(
        {
            "kind": "prose_folder",
            "path": str(tmp_path / "wiki.raw"),
            "document_delimiter": r"^ = [^=].* = $",
            "skip_line_regex": r"^ (= )+.*( =)+ $",
        }
    )
    assert docs["doc_id"].tolist() == ["wiki:0", "wiki:1"]
    sentences = split_documents(docs)
    assert sentences[sentences["doc_id"] == "wiki:0"]["text"].tolist() == [
        "Alpha one .",
        "Alpha two .",
        "Alpha three .",
    ]


def test_google_format(tmp_path: Path):
    (tmp_path / "g.txt").write_text("S one. Still one\nS two.\n\n\nD2 s1.\n", encoding="utf-8")
    docs = ingest_documents({"kind": "google_text", "path": str(tmp_path)})
    sentences = split_documents(docs)
    assert sentences.groupby("doc_id")["text"].apply(list).to_dict() == {
        "g:0": ["S one. Still one", "S two."],
        "g:1": ["D2 s1."],
    }


def test_a_big_google_file_is_read_in_blocks_that_cut_only_between_documents(tmp_path: Path):
    docs = [
        "\n".join(f"Doc {d} sentence {k}" + "é" * (d % 7) for k in range(1 + d % 5))
        for d in range(300)
    ]
    # blank lines of several kinds between documents; "\n\n" is where a block may end
    breaks = ["\n\n", "\n \n", "\n\n\n"]
    text = "".join(doc + breaks[d % 3] for d, doc in enumerate(docs))
    (tmp_path / "g.txt").write_text(text, encoding="utf-8")
    whole = ingest_documents(
        {"kind": "google_text", "path": str(tmp_path), "partition_size": 10**9}
    )
    source = {"kind": "google_text", "path": str(tmp_path), "partition_size": 1000}
    parts = corpus_partitions(source)
    blocked = ingest_documents(source)

    assert len(parts) == -(-len(text.encode()) // 1000)
    assert whole["text"].tolist() == blocked["text"].tolist() == docs
    assert whole["doc_id"].tolist() == [f"g:{k}" for k in range(300)]
    assert blocked["doc_id"].is_unique
    assert blocked["doc_id"].iloc[-1].startswith("g@")


def test_a_block_with_bad_utf8_names_the_files_byte(tmp_path: Path):
    data = ("First document.\n\n" * 200).encode() + b"\xff\xfe bad.\n"
    (tmp_path / "g.txt").write_bytes(data)
    with pytest.raises(CorpusError, match=rf"g.txt: not valid UTF-8 \(byte {len(data) - 8}:"):
        ingest_documents({"kind": "google_text", "path": str(tmp_path), "partition_size": "1KiB"})


@pytest.mark.parametrize("size", ["lots", 0, -5])
def test_a_bad_partition_size_is_refused_naming_the_key(tmp_path: Path, size):
    with pytest.raises(CorpusError, match="pretrain_corpus.partition_size"):
        corpus_partitions({"kind": "google_text", "path": str(tmp_path), "partition_size": size})


def test_small_files_are_read_together_up_to_the_partition_size(tmp_path: Path):
    for k in range(10):
        (tmp_path / f"f{k}.txt").write_text(f"Book {k} begins.\n\n" + "x" * 290, encoding="utf-8")
    source = {"kind": "prose_folder", "path": str(tmp_path)}
    parts = corpus_partitions({**source, "partition_size": 1000})
    assert [len(p["pieces"]) for p in parts] == [3, 3, 3, 1]
    docs = ingest_documents({**source, "partition_size": 1000})
    assert docs["doc_id"].tolist() == ingest_documents(source)["doc_id"].tolist()
    assert docs["doc_id"].tolist() == [f"f{k}" for k in range(10)]


def test_jsonl_and_parquet_tables(tmp_path: Path):
    rows = [{"id": "x", "body": "One. Two."}, {"id": "y", "body": "Three."}]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    docs = ingest_documents(
        {
            "kind": "table",
            "path": str(tmp_path / "a.jsonl"),
            "text_column": "body",
            "id_column": "id",
        }
    )
    assert docs["doc_id"].tolist() == ["x", "y"]
    pd.DataFrame(rows).to_parquet(tmp_path / "b.parquet")
    docs = ingest_documents(
        {"kind": "table", "path": str(tmp_path / "b.parquet"), "text_column": "body"}
    )
    assert docs["doc_id"].tolist() == ["b:0", "b:1"]
    with pytest.raises(CorpusError, match=r"a.jsonl row 0: no column 'text'"):
        ingest_documents({"kind": "table", "path": str(tmp_path / "a.jsonl")})
    # a folder of tables: .parquet and .jsonl by default, ids keep the sub-folder
    (tmp_path / "AA").mkdir()
    (tmp_path / "AB").mkdir()
    for sub in ("AA", "AB"):
        pd.DataFrame(rows).to_parquet(tmp_path / sub / "wiki_00.parquet")
    (tmp_path / "AA" / "notes.txt").write_text("not a table", encoding="utf-8")
    docs = ingest_documents({"kind": "table", "path": str(tmp_path), "text_column": "body"})
    assert docs["doc_id"].tolist() == [
        "AA/wiki_00:0", "AA/wiki_00:1", "AB/wiki_00:0", "AB/wiki_00:1", "a:0", "a:1", "b:0", "b:1"
    ]  # fmt: skip


@pytest.mark.parametrize("streaming", [False, True])
def test_hf_dataset_from_local_parquet(tmp_path: Path, streaming: bool):
    pd.DataFrame({"text": ["First doc. Yes.", "Second doc."]}).to_parquet(tmp_path / "d.parquet")
    source = {
        "kind": "hf_dataset",
        "hf": {
            "name": "parquet",
            "data_files": str(tmp_path / "d.parquet"),
            "split": "train",
            "streaming": streaming,
        },
    }
    docs = ingest_documents(source)
    assert docs["doc_id"].tolist() == ["parquet/train:0", "parquet/train:1"]
    assert docs["text"].iloc[1] == "Second doc."


def test_non_utf8_file_is_named_unless_replacement_allowed(tmp_path: Path):
    (tmp_path / "good.txt").write_text("Fine text.\n", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes("Caf\xe9 latin-1.\n".encode("latin-1"))
    source = {"kind": "prose_folder", "path": str(tmp_path)}
    with pytest.raises(CorpusError, match=r"bad.txt: not valid UTF-8 .*encoding_errors: replace"):
        ingest_documents(source)
    docs = ingest_documents({**source, "encoding_errors": "replace"})
    assert docs.set_index("doc_id").loc["bad", "text"].startswith("Caf\ufffd")


def test_missing_empty_and_blank_sources(tmp_path: Path):
    with pytest.raises(CorpusError, match=r"nowhere does not exist .*pretrain_corpus.path"):
        ingest_documents({"kind": "prose_folder", "path": str(tmp_path / "nowhere")})
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        CorpusError, match=r"empty holds no files matching \['\*.txt', '\*.txt.gz', '\*.txt.bz2'\]"
    ):
        ingest_documents({"kind": "prose_folder", "path": str(tmp_path / "empty")})
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "a.txt").write_text(" \n\n\t\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="yielded no non-empty documents"):
        ingest_documents({"kind": "prose_folder", "path": str(tmp_path / "blank")})
    with pytest.raises(CorpusError, match="pretrain_corpus.kind='folder'"):
        ingest_documents({"kind": "folder", "path": str(tmp_path)})
    with pytest.raises(CorpusError, match="document_delimiter"):
        ingest_documents(
            {"kind": "prose_folder", "path": str(tmp_path / "blank"), "document_delimiter": "("}
        )


def _line_of(text: str, part: str) -> int:
    return text[: text.index(part)].count("\n") + 1


def test_wikiextractor_article_without_its_end_tag_is_not_merged_into_the_next(tmp_path: Path):
    """One </doc> missing and a stray one later: the tag counts match, the file is still bad."""
    folder = write_wikiextractor(tmp_path, {"AA/wiki_00": ["river", "lake", "hill"]})
    path = folder / "AA" / "wiki_00.gz"
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    text = text.replace("</doc>\n", "", 1)  # article 100 loses its end tag
    end_of_101 = text.index("</doc>\n") + len("</doc>\n")
    text = text[:end_of_101] + "</doc>\n" + text[end_of_101:]
    assert text.count("<doc ") == text.count("</doc>") == 3
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    line = _line_of(text, '<doc id="101"')
    with pytest.raises(
        CorpusError,
        match=rf"AA/wiki_00.gz line {line}: <doc id='101'> opens before doc id='100' \(line 1\)",
    ):
        ingest_documents({"kind": "wikiextractor", "path": str(folder)})


def test_wikiextractor_text_outside_an_article_is_named(tmp_path: Path):
    folder = write_wikiextractor(tmp_path, {"AA/wiki_00": ["river", "lake"]})
    path = folder / "AA" / "wiki_00.gz"
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    text = text.replace("</doc>\n", "</doc>\nA paragraph of no article.\n", 1)
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    line = _line_of(text, "A paragraph of no article.")
    with pytest.raises(
        CorpusError, match=rf"wiki_00.gz line {line}: text outside any <doc> \(after doc id='100'"
    ):
        ingest_documents({"kind": "wikiextractor", "path": str(folder)})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('<doc id="101"', "<doc  id=101", 1), r"line 8: malformed <doc> tag"),
        (lambda t: t + "</doc>\n", r"line 15: </doc> without an open <doc> \(after doc id='101'"),
        (lambda t: "</doc>\n" + t, r"line 1: </doc> without an open <doc> \(before the first"),
        (lambda t: t[: t.rindex("</doc>")], r"doc id='101' \(line 8\) has no </doc>"),
        (lambda t: t + "\n  \ntrailing text\n", r"line 17: text outside any <doc>"),
        (lambda t: "", r"no <doc> tag"),
    ],
)
def test_wikiextractor_tag_errors_name_the_line(tmp_path: Path, edit, message: str):
    folder = write_wikiextractor(tmp_path, {"AA/wiki_00": ["river", "lake"]})
    path = folder / "AA" / "wiki_00.gz"
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    path.write_bytes(gzip.compress(edit(text).encode("utf-8")))
    with pytest.raises(CorpusError, match=message):
        ingest_documents({"kind": "wikiextractor", "path": str(folder)})


def test_wikiextractor_tag_lines_and_headings(tmp_path: Path):
    """A tag line is a whole line: an indented or trailing `</doc>` is text; a heading (no
    sentence end, closing quotes allowed) and the title line are dropped."""
    text = (
        '<doc id="7" url="u" title="T">\nT\nHeading\n  </doc>\nShe said "yes."  \n'
        "A list item\nEnds (here.)\n</doc>  \n\n"
    )
    folder = tmp_path / "wiki"
    (folder / "AA").mkdir(parents=True)
    (folder / "AA" / "wiki_00.bz2").write_bytes(bz2.compress(text.encode("utf-8")))
    docs = ingest_documents({"kind": "wikiextractor", "path": str(folder)})
    assert docs["doc_id"].tolist() == ["7"]
    assert docs["text"].iloc[0] == 'She said "yes."\n\nEnds (here.)'


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_a_truncated_archive_is_named(tmp_path: Path, suffix: str):
    compress = {".gz": gzip.compress, ".bz2": bz2.compress}[suffix]
    path = tmp_path / f"book.txt{suffix}"
    path.write_bytes(compress(b"A sentence of the book.\n" * 500)[:-20])
    with pytest.raises(CorpusError, match=rf"book.txt{suffix}: not a readable {suffix} file"):
        ingest_documents({"kind": "prose_folder", "path": str(tmp_path)})


def test_zero_sentences_after_cleaning():
    docs = pd.DataFrame({"doc_id": ["a"], "source": ["x"], "text": ["\u200b"], "layout": ["prose"]})
    with pytest.raises(CorpusError, match="no sentences left after cleaning"):
        split_documents(docs)


@pytest.mark.parametrize("streaming", [False, True])
def test_hf_dataset_is_read_in_partitions(tmp_path: Path, streaming: bool, monkeypatch):
    """Blocks of rows (local Arrow cache) or one partition per data file (streamed)."""
    import bert_pipeline.data.corpus as corpus

    monkeypatch.setattr(corpus, "HF_ROWS_PER_PARTITION", 3)
    files = []
    for k in range(3):
        files.append(str(tmp_path / f"p{k}.parquet"))
        pd.DataFrame({"text": [f"Doc {k}-{i}. Yes." for i in range(4)]}).to_parquet(files[-1])
    hf = {"name": "parquet", "data_files": files, "split": "train", "streaming": streaming}
    source = {"kind": "hf_dataset", "hf": hf}
    parts = corpus.corpus_partitions(source)
    assert len(parts) == (3 if streaming else 4)
    docs = pd.concat([corpus.read_partition(p) for p in parts], ignore_index=True)
    assert docs["text"].tolist() == [f"Doc {k}-{i}. Yes." for k in range(3) for i in range(4)]
    ids = ["parquet/train:1:0", "parquet/train:1:1"] if streaming else ["parquet/train:4"]
    assert set(ids) <= set(docs["doc_id"]) and docs["doc_id"].is_unique


def test_a_failed_validation_names_the_check_without_dumping_documents():
    from bert_pipeline.schemas.pretraining import validate_frame

    long_text = "word " * 20_000
    frame = pd.DataFrame(
        {
            "doc_id": ["a", "a"],
            "source": ["f.txt", "f.txt"],
            "text": [long_text, long_text],
            "layout": ["prose", "poem"],
        }
    )
    with pytest.raises(ValueError) as info:
        validate_frame(DocumentsSchema, frame, "partition 3")
    message = str(info.value)
    assert message.startswith("partition 3: DocumentsSchema failed")
    assert "layout" in message and "doc_id" in message and "poem" in message
    assert len(message) < 1000  # a few cases cut to 80 characters, never the documents


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"document_delimeter": "^="}, r"pretrain_corpus.document_delimeter: Key 'document_delim"),
        ({"hf": {"nmae": "wiki"}}, r"pretrain_corpus.hf.nmae: Key 'nmae'"),
        ({"max_documents": "all"}, r"pretrain_corpus.max_documents: Value 'all'"),
        ({"title_line": "skip"}, r"pretrain_corpus.title_line='skip' must be drop or keep"),
        ({"kind": "hf_dataset"}, r"pretrain_corpus.hf.name=None must be set for kind hf_dataset"),
    ],
)
def test_bad_source_keys_are_refused_by_name(tmp_path: Path, source: dict, message: str):
    with pytest.raises(CorpusError, match=message):
        ingest_documents({"kind": "prose_folder", "path": str(tmp_path), **source})


def test_paragraphs_turn_every_whitespace_run_into_one_space():
    """Every character Python counts as whitespace separates words; invisible ones vanish."""
    spaces = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
    text = f"{spaces}a{spaces}b \u00a0 c\u200bd\x1ce{spaces}\n\n f\u3000\u3000g "
    assert paragraphs(text, "prose") == ["a b cde", "f g"]
