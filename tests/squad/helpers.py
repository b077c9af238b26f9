"""Synthetic SQuAD files (v1.1 and v2.0 layout) from invented facts, so no public text lands
in the repository; the bundled sample data/01_raw/squad_sample is `write_sample`'s, its dev
questions about places and groups train never names, so none is a train question."""

from __future__ import annotations

import json
import random
from pathlib import Path

PEOPLE = ["Mara Quillon", "Anselm Vey", "Liss Oranto", "Pell Arkwin", "Ttobo Marsh", "Ida Fenn"]
PLACES = ["Kelbridge", "North Amary", "Port Ilsun", "the Sorrel Valley", "Ostrava Bay"]
GROUPS = ["Greyhollow Mills", "the Tarsen Union", "the Velmar Bank", "Ostrova FC"]
DAYS = ["Monday", "Tuesday", "Friday", "Sunday"]
NAMES = {"people": PEOPLE, "places": PLACES, "groups": GROUPS}
HELD_OUT_NAMES = {
    "people": ["Mara Quillon", "Ida Fenn", "Corin Adeyo", "Tamsin Rook", "Belo Sarrat"],
    "places": ["Ravensholm", "the Ferro Coast", "Lake Undry", "Castel Mire", "Harwick Cross"],
    "groups": ["Pellwick Foods", "the Amary Rail Board", "Dunmore Press", "the Orrin Guild"],
}


def paragraph(rng: random.Random, version_2: bool, n: int, names: dict = NAMES) -> dict:
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

    people, places, groups = names["people"], names["places"], names["groups"]
    person, place, day = rng.choice(people), rng.choice(places), rng.choice(DAYS)
    add(
        f"{person} visited {place} on {day}.",
        [(f"Who visited {place}?", person), (f"When did {person} visit {place}?", day)],
    )
    group, other, year = rng.choice(groups), rng.choice(people), str(rng.randint(1890, 1990))
    add(
        f"In {year} {group} hired {other} as its treasurer.",
        [(f"Who did {group} hire?", other), (f"In which year did {group} hire {other}?", year)],
    )
    if version_2:
        absent = next(p for p in places if p != place)
        qas.append(
            {
                "id": f"q{n}-{len(qas)}",
                "question": f"Who visited {absent}?",
                "answers": [],
                "is_impossible": True,
            }
        )
    return {"context": context.strip(), "qas": qas}


def squad_document(articles: int, seed: str, version_2: bool = False, names: dict = NAMES) -> dict:
    rng = random.Random(seed)
    data, n = [], 0
    for a in range(articles):
        paragraphs = []
        for _ in range(3):
            paragraphs.append(paragraph(rng, version_2, n, names))
            n += 1
        data.append({"title": f"Article_{a}", "paragraphs": paragraphs})
    return {"version": "v2.0" if version_2 else "1.1", "data": data}


def write_squad_folder(
    root: Path, version_2: bool = False, sizes: dict | None = None, held_out: bool = False
) -> Path:
    """`held_out`: dev from HELD_OUT_NAMES, so no dev question is a train question."""
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (sizes or {"train": 8, "dev": 3}).items():
        names = HELD_OUT_NAMES if held_out and split != "train" else NAMES
        document = squad_document(n, split, version_2, names)
        (root / f"{split}.json").write_text(json.dumps(document), encoding="utf-8")
    return root


def write_sample(root: Path = Path("data/01_raw/squad_sample")) -> Path:
    """The bundled sample (python -c 'from tests.squad.helpers import write_sample;
    write_sample()')."""
    return write_squad_folder(root, False, {"train": 60, "dev": 10}, held_out=True)
