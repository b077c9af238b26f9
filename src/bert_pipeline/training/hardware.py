"""Precision and compilation chosen for the machine a run lands on (`precision: auto`,
`compile: auto`).

bf16 pays only on hardware with bf16 units: a GPU that supports it, or a CPU with AMX or
AVX512-BF16. Elsewhere torch emulates bf16 and a step is slower than fp32 (2.2x on an AVX-512
Xeon without bf16 units, 17x on a 2-core AVX2 EPYC). torch.compile pays on the CPU only with
bf16 (it fuses the casts around every kernel: 1.86x the fp32 step on a Xeon with bf16 units; in
fp32 it was no faster after a minute of compiling) and needs a C++ compiler; on a GPU it needs
Triton. The checks are torch's own
(`torch.cpu`, `torch.cuda`).

A CPU run also has glibc's malloc keep the memory a step frees (`keep_freed_memory`).
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import shutil
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)

AUTO = "auto"
BF16_MIXED = "bf16-mixed"
EMULATED_BF16_SLOWDOWN = (
    "2.2x slower than fp32 on an AVX-512 Xeon without bf16 units "
    "(benchmarks/training_speed_no_bf16_units.md), 17x on an AVX2 EPYC (issue #36)"
)


# mallopt(3) parameters, from glibc's malloc.h
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4


@dataclass(frozen=True)
class MachineChoice:
    """What a run uses, and why (one line in the log, two MLflow parameters)."""

    precision: str
    compile: bool
    reason: str

    def params(self) -> dict[str, str]:
        return {"precision_chosen": self.precision, "compile_chosen": str(self.compile).lower()}


def _uses_cuda(accelerator: str) -> bool:
    return accelerator in ("gpu", "cuda") or (accelerator == AUTO and torch.cuda.is_available())


def bf16_units(accelerator: str = AUTO) -> str | None:
    """The bf16 units the run's device has ("AMX", "AVX512-BF16", a GPU's name), or None."""
    if _uses_cuda(accelerator):
        return torch.cuda.get_device_name() if torch.cuda.is_bf16_supported() else None
    if torch.cpu._is_amx_tile_supported():
        return "AMX"
    if torch.cpu._is_avx512_bf16_supported():
        return "AVX512-BF16"
    return None


def _cxx_compiler() -> str | None:
    return os.environ.get("CXX") or next(
        (c for c in ("g++", "c++", "clang++") if shutil.which(c)), None
    )


def choose(precision: str, compile: bool | str, accelerator: str = AUTO) -> MachineChoice:
    """`precision` and `compile` with "auto" replaced by what pays on this machine."""
    units = bf16_units(accelerator)
    cuda = _uses_cuda(accelerator)
    reasons = []
    if precision == AUTO:
        if units:
            precision = BF16_MIXED
            reasons.append(f"bf16-mixed: {units} found")
        elif cuda:
            precision = "16-mixed"
            reasons.append("16-mixed: this GPU has no bf16 units")
        else:
            precision = "32"
            reasons.append("fp32: this CPU has no bf16 units (AMX or AVX512-BF16)")
    if compile == AUTO:
        if cuda:
            compile = importlib.util.find_spec("triton") is not None
            reasons.append("torch.compile" if compile else "no torch.compile: Triton is missing")
        elif precision != BF16_MIXED:
            compile = False
            reasons.append("no torch.compile: no faster in fp32 on a CPU")
        else:
            compiler = _cxx_compiler()
            compile = compiler is not None
            reasons.append(
                f"torch.compile with {compiler}" if compile else "no torch.compile: no C++ compiler"
            )
    return MachineChoice(precision, bool(compile), "; ".join(reasons))


def warn_emulated_bf16(precision: str, accelerator: str = AUTO) -> None:
    """One warning line when bf16 was asked for explicitly on a device without bf16 units."""
    if precision.startswith("bf16") and bf16_units(accelerator) is None:
        logger.warning(
            "precision %s on a device without bf16 units: torch emulates bf16, measured %s; "
            "set precision: auto or 32",
            precision,
            EMULATED_BF16_SLOWDOWN,
        )


def keep_freed_memory(accelerator: str = AUTO) -> bool:
    """On a CPU run, has glibc's malloc keep the memory a step frees for the next step.

    By default glibc serves each tensor over 32 MiB (the bf16 masked-LM logits of a budget step
    are 1280 x 16000) with a fresh mmap, and the kernel zero-fills its pages on first touch; that
    made the compiled bf16 step ~1.2x slower on an AMX Xeon (issue #36; time it with
    `benchmarks/training_speed.py --malloc glibc`). The process then keeps its peak memory until
    it exits. False where the C library is not glibc.
    """
    if _uses_cuda(accelerator):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return all(
        mallopt(param, value)
        for param, value in ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, 2**31 - 1), (M_TOP_PAD, 256 << 20))
    )
