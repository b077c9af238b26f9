"""How long a `kedro` command takes before it does anything: `kedro --help`, and a run refused
for a bad parameter (the answer a user waits for after a typo).

Each command runs `--repeats` times from the checkout's root, interleaved with the same command
on `--baseline` (a git revision checked out into a temporary worktree and imported through
PYTHONPATH from the same virtual environment); the report gives medians and the ratio.

    python benchmarks/cli_startup.py --repeats 5 --baseline ca52863
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import KEDRO, ROOT, baseline_checkout, command_line, cpu_name, write_report

REFUSED_MESSAGE = "pretrain_model.optimizer.lr=-1.0 must be > 0"


def commands(scratch: Path) -> dict[str, list[str]]:
    refused = f"data_dir={scratch / 'data'},pretrain_model.optimizer.lr=-1"
    return {
        "kedro --help": [KEDRO, "--help"],
        "refused kedro run": [KEDRO, "run", "--pipeline", "pretrain", "--params", refused],
    }


def timed(command: list[str], cwd: Path, env: dict[str, str], expect: str | None) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if expect is not None and expect not in done.stdout + done.stderr:
        raise SystemExit(f"{' '.join(command)} in {cwd} did not answer {expect!r}:\n{done.stderr}")
    return seconds


def checkouts(
    baseline: str | None, tree: Path | None, scratch: Path
) -> dict[str, tuple[Path, dict[str, str]]]:
    """name -> (working directory, environment) of each side measured."""
    env = {
        **os.environ,
        "KEDRO_DISABLE_TELEMETRY": "true",
        "MLFLOW_TRACKING_URI": f"sqlite:///{scratch / 'mlflow.db'}",
    }
    sides = {"current": (ROOT, env)}
    if tree:
        sides[f"baseline {baseline}"] = (tree, {**env, "PYTHONPATH": str(tree / "src")})
    return sides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", help="git revision to compare with (e.g. a commit of main)")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "cli_startup.md")
    parser.add_argument("--note", default="", help="a line under the table")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        with baseline_checkout(args.baseline, scratch) as tree:
            sides = checkouts(args.baseline, tree, scratch)
            times = {(s, c): [] for s in sides for c in commands(scratch)}
            for _ in range(args.repeats + 1):
                for (side, name), samples in times.items():
                    cwd, env = sides[side]
                    expect = REFUSED_MESSAGE if name.startswith("refused") else None
                    samples.append(timed(commands(scratch)[name], cwd, env, expect))
    load_after = os.getloadavg()[0]

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Command start-up time (benchmarks/cli_startup.py)",
        "",
        f"Measured {now} with `{command_line('benchmarks/cli_startup.py')}`.",
        "",
        f"- CPU: {cpu_name()}, {os.cpu_count()} logical cores; 1-min load average "
        f"{load_before:.1f} before, {load_after:.1f} after (1 = this script alone)",
        f"- {args.repeats} runs of each command per side, interleaved; wall time of the whole "
        "process, medians",
        "- refused run: `kedro run --pipeline pretrain --params "
        f"...,pretrain_model.optimizer.lr=-1` (answer: `{REFUSED_MESSAGE}`)",
        "- one untimed run of each first (a fresh checkout compiles its bytecode)",
        "",
        "| command | "
        + " | ".join(f"{side} (s)" for side in sides)
        + " |"
        + (" baseline / current |" if args.baseline else ""),
        "|---|" + "---:|" * (len(sides) + bool(args.baseline)),
    ]
    for name in commands(scratch):
        medians = [statistics.median(times[side, name][1:]) for side in sides]
        ratio = f" {medians[1] / medians[0]:.1f}x |" if args.baseline else ""
        lines.append(f"| {name} | " + " | ".join(f"{m:.2f}" for m in medians) + " |" + ratio)
    write_report(lines, args.note, args.output)


if __name__ == "__main__":
    main()
