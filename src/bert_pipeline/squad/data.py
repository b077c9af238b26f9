"""SQuAD JSON (v1.1, v2.0) and the `datasets` layout to one question table.

Columns: id, title, context, question, answer_texts (list), answer_starts (list, character
offsets into context), is_impossible (v2.0's unanswerable questions; no answers then).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

COLUMNS = ["id", "title", "context", "question", "answer_texts", "answer_starts", "is_impossible"]


class SquadDataError(ValueError):
    """A SQuAD file or table that cannot be used; the message names the file and question id."""


def _check(row: dict, where: str, labeled: bool) -> None:
    if not row["question"].strip():
        raise SquadDataError(f"{where}: question {row['id']!r} is empty")
    if not row["context"].strip():
        raise SquadDataError(f"{where}: question {row['id']!r} has an empty context")
    for text, start in zip(row["answer_texts"], row["answer_starts"], strict=True):
        found = row["context"][start : start + len(text)]
        if start < 0 or found != text:
            raise SquadDataError(
                f"{where}: question {row['id']!r}: answer {text!r} is not at character "
                f"{start} of its context (found {found!r})"
            )
    if labeled and not row["is_impossible"] and not row["answer_texts"]:
        raise SquadDataError(f"{where}: question {row['id']!r} has no answer")
    if row["is_impossible"] and row["answer_texts"]:
        raise SquadDataError(f"{where}: question {row['id']!r} is impossible but has answers")


def squad_version(*tables: pd.DataFrame) -> str:
    """The SQuAD version of a run: 2.0 when any question is unanswerable (`is_impossible`)."""
    return "2.0" if any(bool(t["is_impossible"].any()) for t in tables) else "1.1"


def _table(rows: list[dict], source: str) -> pd.DataFrame:
    seen: set[str] = set()
    for row in rows:
        if row["id"] in seen:
            raise SquadDataError(f"{source}: question id {row['id']!r} appears twice")
        seen.add(row["id"])
    if not rows:
        raise SquadDataError(f"{source}: no questions")
    return pd.DataFrame(rows, columns=COLUMNS)


def parse_squad(document: dict, source: str, labeled: bool = True) -> pd.DataFrame:
    """The questions of a SQuAD JSON document (`{"version", "data": [articles]}`)."""
    if not isinstance(document.get("data"), list):
        raise SquadDataError(f"{source}: no 'data' list of articles (not a SQuAD file)")
    rows = []
    for article in document["data"]:
        for paragraph in article.get("paragraphs", []):
            for qa in paragraph.get("qas", []):
                try:
                    answers = qa.get("answers", [])
                    row = {
                        "id": str(qa["id"]),
                        "title": str(article.get("title", "")),
                        "context": str(paragraph["context"]),
                        "question": str(qa["question"] or ""),
                        "answer_texts": [str(a["text"]) for a in answers],
                        "answer_starts": [int(a["answer_start"]) for a in answers],
                        "is_impossible": bool(qa.get("is_impossible", False)),
                    }
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    qid = qa.get("id", "without an id") if isinstance(qa, dict) else qa
                    raise SquadDataError(
                        f"{source}: question {qid!r} is malformed ({type(exc).__name__}: {exc})"
                    ) from None
                _check(row, source, labeled)
                rows.append(row)
    return _table(rows, source)


def read_squad(path: str | Path, labeled: bool = True) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise SquadDataError(f"missing SQuAD file {path}")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SquadDataError(f"{path}: not JSON ({exc})") from None
    return parse_squad(document, str(path), labeled)


def table_from_hf(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """rajpurkar/squad(_v2) rows (answers = {text: [...], answer_start: [...]}) as our table;
    a question without answers is v2.0's unanswerable one."""
    rows = []
    for r in frame.itertuples(index=False):
        texts = [str(t) for t in r.answers["text"]]
        row = {
            "id": str(r.id),
            "title": str(r.title),
            "context": str(r.context),
            "question": str(r.question),
            "answer_texts": texts,
            "answer_starts": [int(s) for s in r.answers["answer_start"]],
            "is_impossible": not texts,
        }
        _check(row, source, labeled=False)
        rows.append(row)
    return _table(rows, source)


def official_predictions(predictions: dict[str, str]) -> str:
    """predictions.json as the official evaluation scripts read it: {question id: answer}."""
    return json.dumps(predictions, ensure_ascii=False, indent=1)
