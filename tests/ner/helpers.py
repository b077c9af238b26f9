"""Synthetic CoNLL-2003-format files: generated sentences with invented entities, so no public
text lands in the repository (the bundled sample data/01_raw/conll_sample is `write_sample`'s:
its dev and test sentences come from other templates than train's, so none is a train sentence,
and mix train's entities with unseen ones)."""

from __future__ import annotations

import random
from pathlib import Path

from bert_pipeline.ner.conll import iob2_to_iob1

ENTITIES = {
    "PER": ["Mara Quillon", "Ttobo", "Anselm Vey", "Liss Oranto", "Dr Pell Arkwin"],
    "ORG": ["Greyhollow Mills", "Tarsen Union", "the Velmar Bank", "Ostrova FC"],
    "LOC": ["Kelbridge", "North Amary", "the Sorrel Valley", "Port Ilsun"],
    "MISC": ["Amaryan", "Kelbridge Cup", "Velmari"],
}
TEMPLATES = [
    "{PER} visited {LOC} on Monday .",
    "{ORG} said profits rose 4 percent in {LOC} .",
    "{PER} of {ORG} won the {MISC} final .",
    "Shares in {ORG} fell after {PER} resigned .",
    "The {MISC} delegation left {LOC} late on Friday .",
    "{LOC} beat {LOC} 2-1 .",
]
HELD_OUT_ENTITIES = {
    "PER": ["Mara Quillon", "Ttobo", "Oskar Brennat", "Yeva Tolm", "Dr Hesse Corlan"],
    "ORG": ["Tarsen Union", "Ostrova FC", "Pellwick Foods", "the Amary Rail Board"],
    "LOC": ["Kelbridge", "Port Ilsun", "Ravensholm", "the Ferro Coast"],
    "MISC": ["Velmari", "Ostrovan", "Harrow Shield"],
}
HELD_OUT_TEMPLATES = [
    "{PER} arrived in {LOC} for talks with {ORG} .",
    "{ORG} opened a new office in {LOC} last week .",
    "Police in {LOC} said {PER} was not hurt .",
    "{PER} , a {MISC} citizen , joined {ORG} in March .",
    "The {MISC} government named {PER} as its new envoy .",
    "{ORG} and {ORG} agreed to merge , a spokesman said .",
    "Heavy rain closed roads between {LOC} and {LOC} .",
    "{PER} will meet {PER} in {LOC} on Tuesday .",
    "Trading in {ORG} shares resumed after the {MISC} holiday .",
    "{PER} scored twice as {ORG} won the {MISC} title .",
]
SIZES = {"train": 40, "valid": 12, "test": 12}


def sentence(
    rng: random.Random, templates: list[str] = TEMPLATES, entities: dict = ENTITIES
) -> list[tuple[str, str]]:
    """(word, IOB2 tag) pairs of one generated sentence."""
    out = []
    for word in rng.choice(templates).split():
        if word.startswith("{"):
            kind = word.strip("{}")
            for i, part in enumerate(rng.choice(entities[kind]).split()):
                out.append((part, f"{'B' if i == 0 else 'I'}-{kind}"))
        else:
            out.append((word, "O"))
    return out


def conll_text(
    n: int, seed: str, scheme: str = "IOB2", per_doc: int = 5, held_out: bool = False
) -> str:
    """`n` sentences in documents of `per_doc`, with POS/chunk columns as CoNLL-2003's
    (`held_out`: from the held-out templates and entities)."""
    rng = random.Random(seed)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for i in range(n):
        if i and i % per_doc == 0:
            lines += ["-DOCSTART- -X- -X- O", ""]
        pairs = sentence(rng, *((HELD_OUT_TEMPLATES, HELD_OUT_ENTITIES) if held_out else ()))
        tags = [t for _, t in pairs]
        if scheme == "IOB1":
            tags = iob2_to_iob1(tags)
        lines += [f"{w} NNP B-NP {t}" for (w, _), t in zip(pairs, tags, strict=True)]
        lines.append("")
    return "\n".join(lines) + "\n"


def write_conll_folder(
    root: Path, scheme: str = "IOB2", sizes: dict | None = None, held_out: bool = False
) -> Path:
    """`held_out`: valid and test from the held-out templates, so none repeats a train sentence."""
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (sizes or SIZES).items():
        text = conll_text(n, split, scheme, held_out=held_out and split != "train")
        (root / f"{split}.txt").write_text(text, encoding="utf-8")
    return root


def write_sample(root: Path = Path("data/01_raw/conll_sample")) -> Path:
    """The bundled sample: python -c 'from tests.ner.helpers import write_sample; write_sample()'"""
    return write_conll_folder(root, "IOB2", {"train": 400, "valid": 60, "test": 60}, held_out=True)
