"""Per-token vectors of chosen BERT layers, as google's extract_features.py: text in, Parquet out.

    python -m bert_pipeline.extract_features --model data/06_models/bert_pretrained \\
        --input sentences.txt --output features.parquet --layers -1 -2 -3 -4

One input line per example; `text_a ||| text_b` makes a pair ([CLS] a [SEP] b [SEP], truncated
longest-first as for GLUE). Layers index [embeddings, layer 1, ..., layer L] as Python does:
-1 is the last layer, 0 the embeddings. The output has one row per token of every line: line,
position, token, segment and one float32 list column `layer_<i>` per requested layer.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from bert_pipeline.fsutil import atomic_file
from bert_pipeline.glue.features import GlueFeatures, encode_table
from bert_pipeline.model import BertModel, hidden_states
from bert_pipeline.model.checkpoint import (
    check_checkpoint,
    encoder_only,
    model_from_checkpoint,
    read_checkpoint,
    tokenizer_from_checkpoint,
)

logger = logging.getLogger(__name__)
SEPARATOR = " ||| "


def read_lines(path: Path) -> pd.DataFrame:
    """`text_a` / `text_b` of every line; an empty line is an error naming it."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.rstrip("\n")
            if not text.strip():
                raise ValueError(f"{path}:{number}: empty line")
            a, _, b = text.partition(SEPARATOR)
            rows.append({"text_a": a, "text_b": b or None})
    if not rows:
        raise ValueError(f"{path}: no lines")
    return pd.DataFrame(rows)


@torch.no_grad()
def extract_features(
    checkpoint: dict,
    frame: pd.DataFrame,
    layers: Sequence[int],
    *,
    max_seq_length: int | None = None,
    batch_size: int = 32,
    lowercase: bool = True,
    source: str = "checkpoint",
    device: str = "cpu",
) -> pa.Table:
    """The token rows of `frame`'s texts (see the module docstring) as an Arrow table;
    `max_seq_length` defaults to 128 or the model's max_position_embeddings if smaller."""
    if max_seq_length is None:
        max_seq_length = min(128, checkpoint["config"].get("max_position_embeddings", 512))
    tokenizer = tokenizer_from_checkpoint(checkpoint, source, lowercase)
    check_checkpoint(checkpoint, tokenizer, source, max_seq_length)
    model = model_from_checkpoint(encoder_only(checkpoint), BertModel, source=source)
    model = model.to(device).eval()
    count = model.config.num_hidden_layers + 1
    bad = [i for i in layers if not -count <= i < count]
    if bad:
        raise ValueError(
            f"--layers {bad}: the model has hidden states 0..{count - 1} (or -1..-{count})"
        )
    layers = list(dict.fromkeys(layers))  # `--layers -1 -1` asks for one column
    encoded = encode_table(tokenizer, frame, max_seq_length)
    features = GlueFeatures(encoded, [0] * len(encoded), regression=False)
    columns: dict[str, list] = {"line": [], "position": [], "token": [], "segment": []}
    columns.update({f"layer_{i}": [] for i in layers})
    line = 0
    loader = DataLoader(features, batch_size=batch_size, collate_fn=features.collate)
    for batch in tqdm(loader, desc="extract", unit="batch"):
        inputs = [batch[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")]
        states = [h.cpu() for h in hidden_states(model, *inputs)]
        for row in range(batch["input_ids"].shape[0]):
            n = int(batch["attention_mask"][row].sum())
            ids = batch["input_ids"][row, :n].tolist()
            columns["line"] += [line] * n
            columns["position"] += list(range(n))
            columns["token"] += [tokenizer.id_to_token(i) for i in ids]
            columns["segment"] += batch["token_type_ids"][row, :n].tolist()
            for i in layers:
                columns[f"layer_{i}"].append(states[i][row, :n].float().numpy())
            line += 1
    table = pa.table({k: v for k, v in columns.items() if not k.startswith("layer_")})
    for i in layers:
        vectors = np.concatenate(columns[f"layer_{i}"])  # [tokens, hidden]
        flat = pa.array(vectors.ravel())
        table = table.append_column(
            f"layer_{i}", pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])
        )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="HF-format BERT folder")
    parser.add_argument("--input", type=Path, required=True, help="one text (or a ||| b) per line")
    parser.add_argument("--output", type=Path, required=True, help="Parquet file to write")
    parser.add_argument("--layers", type=int, nargs="+", default=[-1, -2, -3, -4])
    parser.add_argument("--max-seq-length", type=int, default=None, help="default: 128")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default=None, help="torch device; default: cuda if present")
    parser.add_argument(
        "--cased", action="store_true", help="vocab.txt without tokenizer.json: keep case"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        frame = read_lines(args.input)
        table = extract_features(
            read_checkpoint(args.model),
            frame,
            args.layers,
            max_seq_length=args.max_seq_length,
            batch_size=args.batch_size,
            lowercase=not args.cased,
            source=str(args.model),
            device=args.device or ("cuda" if torch.cuda.is_available() else "cpu"),
        )
    except (ValueError, FileNotFoundError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    with atomic_file(args.output) as tmp:
        pq.write_table(table, tmp)
    logger.info("%d tokens of %d lines -> %s", table.num_rows, len(frame), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
