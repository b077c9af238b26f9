"""Makefile targets install what they use, no more."""

from __future__ import annotations

import shutil
import subprocess

import pytest


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lint_installs_only_pinned_ruff(project_root, tmp_path):
    """`make lint` on a fresh machine: ruff at the constraints.txt pin, not the project and its
    ML stack (transformers, a model) as `.[test,hf]` would."""
    plan = subprocess.run(
        ["make", "--dry-run", "--always-make", "lint", f"VENV={tmp_path / 'venv'}"],
        cwd=project_root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    installs = [line for line in plan if " install " in line and "--upgrade pip" not in line]
    assert installs and all(line.endswith("-c constraints.txt ruff") for line in installs), plan
    assert any(line.startswith("ruff==") for line in (project_root / "constraints.txt").open())
    assert any(line.endswith("ruff format --check src tests benchmarks") for line in plan), plan
