"""Synthetic SQuAD files (v1.1 and v2.0 layout) from invented facts, so no public text lands
in the repository; the bundled sample data/01_raw/squad_sample is `write_sample`'s."""

from __future__ import annotations

import json
import random
from pathlib import Path

PEOPLE = ["Mara Quillon", "Anselm Vey", "Liss Oranto", "Pell Arkwin", "Ttobo Marsh", "Ida Fenn"]
PLACES = ["Kelbridge", "North Amary", "Port Ilsun", "the Sorrel Valley", "Ostrava Bay"]
GROUPS = ["Greyhollow Mills", "the Tarsen Union", "the Velmar Bank", "Ostrova FC"]
DAYS = ["Monday", "Tuesday", "Friday", "Sunday"]


def paragraph(rng: random.Random, version_2: bool, n: int) -> dict:
    """A few invented facts and questions about them (v2.0: plus unanswerable ones)."""
    context, qas = "", []

    def add(sentence: str, questions: list[tuple[str, str]]) -> None:
        nonlocal context
        base = len(context)
        context += sentence + " "
        for question, answer in questions:
            start = base + sentence.index(answer)
            qas.append(
                {
                    "id": f"q{n}-{len(qas)}",
                    "question": question,
                    "answers": [{"text": answer, "answer_start": start}],
                    **({"is_impossible": False} if version_2 else {}),
                }
            )

    person, place, day = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(DAYS)
    add(
        f"{person} visited {place} on {day}.",
        [(f"Who visited {place}?", person), (f"When did {person} visit {place}?", day)],
    )
    group, other, year = rng.choice(GROUPS), rng.choice(PEOPLE), str(rng.randint(1890, 1990))
    add(
        f"In {year} {group} hired {other} as its treasurer.",
        [(f"Who did {group} hire?", other), (f"In which year did {group} hire {other}?", year)],
    )
    if version_2:
        absent = next(p for p in PLACES if p != place)
        qas.append(
            {
                "id": f"q{n}-{len(qas)}",
                "question": f"Who visited {absent}?",
                "answers": [],
                "is_impossible": True,
            }
        )
    return {"context": context.strip(), "qas": qas}


def squad_document(articles: int, seed: str, version_2: bool = False) -> dict:
    rng = random.Random(seed)
    data, n = [], 0
    for a in range(articles):
        paragraphs = []
        for _ in range(3):
            paragraphs.append(paragraph(rng, version_2, n))
            n += 1
        data.append({"title": f"Article_{a}", "paragraphs": paragraphs})
    return {"version": "v2.0" if version_2 else "1.1", "data": data}


def write_squad_folder(root: Path, version_2: bool = False, sizes: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (sizes or {"train": 8, "dev": 3}).items():
        document = squad_document(n, split, version_2)
        (root / f"{split}.json").write_text(json.dumps(document), encoding="utf-8")
    return root


def write_sample(root: Path = Path("data/01_raw/squad_sample")) -> Path:
    """The bundled sample (python -c 'from tests.squad.helpers import write_sample;
    write_sample()')."""
    return write_squad_folder(root, False, {"train": 60, "dev": 10})
