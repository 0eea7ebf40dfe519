"""Mutants of optbench's own Triton Adafactor kernel: the adafactor suite's bugs and the bugs a tiled kernel invites,
each swapped into the kernel itself (``Adafactor._mutation``: a host-side scalar, or a compile-time variant of the
device code, optbench.kernels.adafactor_triton_kernels), so the rest of each step is the kernel's own.

They run where the kernel runs: on CUDA, or on CPU tensors in Triton's interpreter (TRITON_INTERPRET=1 set before
the process starts). Elsewhere the catalogue lists none of them: a mutant that cannot be built would "fail" its
suite without any check having caught it.
"""

from __future__ import annotations

import importlib.util
import os

from optbench.kernels.adafactor import TritonAdafactor


class CorrectTritonAdafactor(TritonAdafactor):
    """Control: optbench's Triton Adafactor with no bug."""


class Beta2OffByOneTritonAdafactor(TritonAdafactor):
    """Bug: the beta2 schedule uses (step + 1) ** beta2_decay instead of step ** beta2_decay."""

    _mutation = "beta2_off_by_one"


class UnscaledWeightDecayTritonAdafactor(TritonAdafactor):
    """Bug: decoupled weight decay is not scaled by lr: param *= 1 - weight_decay."""

    _mutation = "unscaled_weight_decay"


class UnflooredClippingTritonAdafactor(TritonAdafactor):
    """Bug: update clipping divides by RMS(update) / d even below 1 (the max(1, .) is dropped)."""

    _mutation = "unfloored_clipping"


class FirstRowTileColumnsTritonAdafactor(TritonAdafactor):
    """Bug: the column means reduce the partial sums of the first row of tiles only (a matrix taller than one
    tile gets col_var from its first rows)."""

    _mutation = "first_row_tile_columns"


class UnsquaredEps1TritonAdafactor(TritonAdafactor):
    """Bug: the variance estimate is clamped at eps1 instead of eps1 ** 2 (a near-zero gradient's update shrinks)."""

    _mutation = "unsquared_eps1"


class RmsAfterDecayTritonAdafactor(TritonAdafactor):
    """Bug: alpha's RMS(param) is measured after weight decay instead of before."""

    _mutation = "rms_after_decay"


RUNNABLE = importlib.util.find_spec("triton") is not None and os.environ.get("TRITON_INTERPRET") == "1"
BUGS = ("Beta2OffByOneTritonAdafactor", "UnscaledWeightDecayTritonAdafactor", "UnflooredClippingTritonAdafactor",
        "FirstRowTileColumnsTritonAdafactor", "UnsquaredEps1TritonAdafactor", "RmsAfterDecayTritonAdafactor")
MUTANTS: dict[str, str] = dict.fromkeys(BUGS, "adafactor") if RUNNABLE else {}
CONTROLS: dict[str, str] = {"CorrectTritonAdafactor": "adafactor"} if RUNNABLE else {}
