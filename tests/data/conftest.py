"""Fixtures of the data tests: a small prose corpus written to a temp folder."""

from __future__ import annotations

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
