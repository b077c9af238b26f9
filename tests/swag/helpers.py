"""SWAG files written by the tests: SWAG's CSV layout and the JSON-lines form."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd

SUBJECTS = ["A man", "A woman", "The dog", "Two children", "A cook", "The driver"]
ACTIONS = ["opens the door", "lifts a box", "waves at a friend", "sits on a bench", "reads a map"]
PLACES = ["in the hall", "by the river", "at the market", "on the roof", "near the gate"]


def swag_rows(n: int, seed: int = 0, contexts: int | None = None) -> list[dict]:
    """`n` SWAG records; `contexts` distinct sent1 values shared round-robin (default: all
    different). The gold ending repeats the context's place, so a model can learn it."""
    rng = random.Random(seed)
    pool = [
        f"{rng.choice(SUBJECTS)} {rng.choice(ACTIONS)} {PLACES[k % len(PLACES)]}."
        for k in range(contexts or n)
    ]
    rows = []
    for i in range(n):
        sent1 = pool[i % len(pool)]
        place = next(p for p in PLACES if p in sent1)
        label = rng.randrange(4)
        endings = [
            f"walks {rng.choice([p for p in PLACES if p != place])} again." for _ in range(4)
        ]
        endings[label] = f"stays {place} for a while."
        rows.append(
            {
                "video-id": f"clip{i // 3}",
                "fold-ind": str(1000 + i),
                "startphrase": f"{sent1} {rng.choice(SUBJECTS)}",
                "sent1": sent1,
                "sent2": rng.choice(SUBJECTS),
                "gold-source": "gold",
                **{f"ending{k}": e for k, e in enumerate(endings)},
                "label": label,
            }
        )
    return rows


def write_swag_csvs(folder: Path, n_train: int = 24, n_val: int = 8, n_test: int = 5) -> Path:
    """train.csv, val.csv and an unlabelled test.csv in SWAG's column order."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, n, seed in (("train", n_train, 1), ("val", n_val, 2), ("test", n_test, 3)):
        frame = pd.DataFrame(swag_rows(n, seed))
        if name == "test":
            frame = frame.drop(columns="label")
        frame.to_csv(folder / f"{name}.csv", index=False)
    return folder


def write_swag_jsonl(path: Path, rows: list[dict]) -> Path:
    keys = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({k: r[k] for k in keys if k in r}) + "\n" for r in rows))
    return path
