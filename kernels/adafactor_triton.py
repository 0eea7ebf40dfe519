"""optbench's Adafactor step in Triton: torch.optim.Adafactor's math for a param group in a few launches.

The device code (``kernels/adafactor_triton_kernels.py``) steps every tensor of a bucket (one dtype and one tile
size, or the vectors) in each launch, reading the tensors' addresses, shapes and per-step scalars from a table sent to
the device in one asynchronous copy a bucket and step: no host synchronisation and no launch per tensor. A tensor's
tile comes from its own shape (``tile``), so its update never depends on which tensors share its param group. The
table's layout (a ``Plan``: the parameters' and state's addresses, shapes and strides, the programs, the partial sums'
offsets) is built once and kept while the bucket's tensors stay where they are; a step writes only the gradients'
addresses and the scalars of its step into it.

A factored bucket (tensors of two or more dimensions, [B, N, M] over the last two) takes five launches:

1. ``sums``: per [BN, BM] tile, row and column sums of g^2 (partials per tile row and tile column) and the
   tile's sum of p^2 (p before weight decay, for RMS(p));
2. ``factors``: row_var and col_var lerped towards the row and column means (the partials reduced in a fixed
   order), stored, and per row block the sum of the stored row_var (for the row mean S);
3. ``update_sq``: per tile, the sum of u^2, u = g / sqrt(max(R_i C_j / max(S, eps1), eps1^2));
4. ``finish``: per tensor, alpha = max(eps2, RMS(p)) * rho and c = alpha / max(1, RMS(u) / d);
5. ``apply``: p = p * (1 - lr * weight_decay) - c * u.

A vector bucket (1-D and 0-D tensors, state ``variance``) takes three: ``vector_sums`` (variance lerped and
stored, sums of u^2 and p^2), ``finish``, ``vector_apply``.

Traffic per element of a factored tensor: g read three times (its factors must be complete before u, and
RMS(u) before any element is updated), p read twice (RMS(p) gates the update) and written once: 6 element
sizes (24 B/param at float32, 12 at bfloat16), plus the per-tile partials (about (1/BN + 1/BM) of one pass
over g, in the accumulation dtype). A vector: g, p and variance read twice, variance and p written: 8.
optbench's roofline model (optbench.perf.roofline) counts 4 and 5: the ceiling this design can reach is
16/24 = 67 % of it for matrices, 62 % for vectors.

Arithmetic is in float32 for 16- and 32-bit tensors (rounded once into p and the state) and in float64
for float64; sums are tree reductions per tile reduced in a fixed order: no atomics, a step is bit-identical
run to run. Tensors whose last dimension is strided (a column-major weight) or whose leading dimensions do
not flatten into one are stepped through contiguous copies written back. On CPU tensors the same kernels run
in Triton's interpreter (slow, for verification: CI checks this kernel's parity there).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import adafactor_triton_kernels as dev
from .adafactor_triton_kernels import kernels

__all__ = ["Plan", "kernels", "step_bucket", "tile"]

BR, BC = 256, 128  # rows and columns per program of the factors launch
BV = 1024  # elements per program of the vector launches
BN_MAX, BM_MAX = 32, 128  # a factored tile's rows and columns at most (4096 elements)
MUTATIONS = {None: 0, "beta2_off_by_one": 0, "unscaled_weight_decay": 0, "unfloored_clipping": dev.MUT_UNFLOORED,
             "first_row_tile_columns": dev.MUT_FIRST_ROW_TILE, "unsquared_eps1": dev.MUT_UNSQUARED_EPS1,
             "rms_after_decay": dev.MUT_RMS_AFTER_DECAY}


def _pow2(n: int, low: int, high: int) -> int:
    return max(low, min(high, 1 << max(0, math.ceil(math.log2(max(n, 1))))))


def _view(tensor: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor | None:
    """``tensor`` as ``shape`` with its last dimension contiguous, without a copy; None where that takes one."""
    if tensor.numel() and tensor.dim() and tensor.stride(-1) != 1:
        return None
    try:
        return tensor.view(shape)
    except RuntimeError:
        return None


class Plan:
    """One bucket's table and programs, valid while its parameters and state tensors stay where they were built.

    ``items`` are (param, row_var, col_var) for a factored bucket, (param, variance, None) for a vector one. A tensor
    that cannot be addressed in place (a strided last dimension, leading dimensions that do not flatten) is stepped
    through a contiguous copy made each step and written back."""

    def __init__(self, items: list[tuple], tile: tuple[int, int] | None):
        p0 = items[0][0]
        self.factored, self.device, self.dtype = tile is not None, p0.device, p0.dtype
        self.acc = torch.float64 if p0.dtype == torch.float64 else torch.float32
        self.built_for = self.signature(items)  # the tensors (addresses, strides) its table holds
        self.shapes = [self._shape(p) for p, *_ in items]
        factored = self.factored
        if factored:
            self.bn, self.bm = tile
        meta = np.zeros((len(items), dev.FW), dtype=np.int64)
        tiles, factors = [], []
        row_at = col_at = tile_at = rv_at = 0
        for k, (b, n, m) in enumerate(self.shapes):
            if factored:
                tn, tm, nrb = -(-n // self.bn), -(-m // self.bm), -(-n // BR)
                count = b * tn * tm
                meta[k, :dev.FW - 1] = [0, 0, 0, 0, b, n, m, n * m, m, n * m, m, tn, tm, row_at, col_at, tile_at,
                                        rv_at, nrb, count] + [0] * (dev.FW - 20)
                factors.append(b * (nrb + -(-m // BC)))
                row_at, col_at, rv_at = row_at + b * tm * n, col_at + b * tn * m, rv_at + b * nrb
            else:
                count = -(-m // BV)
                meta[k, dev.F_M.value], meta[k, dev.F_TILE0.value], meta[k, dev.F_NT.value] = m, tile_at, count
            tiles.append(count)
            tile_at += count
        self.copied = []  # items with a tensor that cannot be addressed in place: their pointers are set per step
        for k, (item, shapes) in enumerate(zip(items, map(self._shapes, self.shapes))):
            views = [None if t is None else _view(t, shape) for t, shape in zip(item, shapes)]
            if any(v is None for v, t in zip(views, item) if t is not None):
                self.copied.append(k)
                continue
            meta[k, [dev.F_P.value, dev.F_R.value]] = views[0].data_ptr(), views[1].data_ptr()
            if factored:
                meta[k, [dev.F_C.value, dev.F_SPB.value, dev.F_SPN.value]] = (views[2].data_ptr(),
                                                                              *views[0].stride()[:2])
        self.meta, self.sizes = meta, (row_at, col_at, tile_at, rv_at)
        self.max_tiles = max(tiles)
        self.tile_table = self._programs(tiles)
        if factored:
            self.factor_table = self._programs(factors)
            self.max_tm = max(-(-m // self.bm) for *_, m in self.shapes)
            self.max_tn = max(-(-n // self.bn) for _, n, _ in self.shapes)
            self.max_nrb = max(-(-n // BR) for _, n, _ in self.shapes)

    def _shape(self, p: torch.Tensor) -> tuple[int, int, int]:
        if self.factored:
            return math.prod(p.shape[:-2]), p.shape[-2], p.shape[-1]
        return 1, 1, p.numel()

    def _shapes(self, shape: tuple[int, int, int]) -> list:
        """The kernels' views of (param, row_var or variance, col_var) for a tensor of [B, N, M] (vector: [1, 1, M])."""
        b, n, m = shape
        return [(b, n, m), (b, n), (b, m)] if self.factored else [(m,), (m,), None]

    def _programs(self, counts: list[int]) -> torch.Tensor:
        """int32 rows (tensor index, that tensor's program index) for ``counts[k]`` programs of tensor k."""
        rows = [np.stack([np.full(n, k, dtype=np.int32), np.arange(n, dtype=np.int32)], 1)
                for k, n in enumerate(counts)]
        return torch.from_numpy(np.concatenate(rows)).to(self.device)

    @staticmethod
    def signature(items: list[tuple]) -> tuple:
        """What the plan's table depends on: every parameter's and state tensor's address, shape and strides."""
        return tuple((t.data_ptr(), t.shape, t.stride()) for item in items for t in item if t is not None)

    def step(self, items: list[tuple], grads: list[torch.Tensor], steps: np.ndarray, hp: dict,
             mutation: str | None) -> None:
        """One step of the bucket: ``items`` as built, their gradients and the step each tensor takes (1-based).
        A contiguous gradient is addressed as it is (the table's default strides); another through a view, or a
        contiguous copy."""
        meta, copies, pointers = self.meta.copy(), [], []
        for k, g in enumerate(grads):
            if g.is_contiguous():
                pointers.append(g.data_ptr())
                continue
            shape = self._shapes(self.shapes[k])[0]
            view = _view(g, shape)
            if view is None:
                view = g.contiguous().view(shape)
                copies.append((None, view))  # only kept alive until the kernels are queued
            pointers.append(view.data_ptr())
            if self.factored:
                meta[k, [dev.F_SGB.value, dev.F_SGN.value]] = view.stride()[:2]
        meta[:, dev.F_G.value] = pointers
        for k in self.copied:  # contiguous copies of what cannot be addressed in place, written back after the step
            views = []
            for t, shape in zip(items[k], self._shapes(self.shapes[k])):
                view = None if t is None else _view(t, shape)
                if t is not None and view is None:
                    view = t.contiguous().view(shape)
                    copies.append((t, view))
                views.append(view)
            meta[k, [dev.F_P.value, dev.F_R.value]] = views[0].data_ptr(), views[1].data_ptr()
            if self.factored:
                meta[k, [dev.F_C.value, dev.F_SPB.value, dev.F_SPN.value]] = (views[2].data_ptr(),
                                                                              *views[0].stride()[:2])
        meta_d, scal_d = self._to_device(meta, self._scalars(steps, hp, mutation))
        self._launch(meta_d, scal_d, mutation)
        for original, copy in copies:
            if original is not None:
                original.copy_(copy.view(original.shape))

    def _scalars(self, steps: np.ndarray, hp: dict, mutation: str | None) -> np.ndarray:
        """Per tensor, the scalars of its step, in the order of the kernels' S_* columns."""
        lr, wd = hp["lr"], hp["weight_decay"]
        eps1 = torch.finfo(self.dtype).eps if hp["eps1"] is None else hp["eps1"]
        scal = np.empty((len(steps), dev.SW), dtype=np.float64)
        scal[:, dev.S_W.value] = (steps + (mutation == "beta2_off_by_one")) ** hp["beta2_decay"]
        scal[:, dev.S_DECAY.value] = 1.0 - (wd if mutation == "unscaled_weight_decay" else lr * wd)
        scal[:, dev.S_RHO.value] = np.minimum(lr, 1.0 / np.sqrt(steps))
        scal[:, dev.S_EPS1.value], scal[:, dev.S_EPS1SQ.value] = eps1, eps1 * eps1
        scal[:, dev.S_EPS2.value], scal[:, dev.S_D.value] = hp["eps2"], hp["d"]
        scal[:, dev.S_NUMEL.value] = [b * n * m for b, n, m in self.shapes]
        scal[:, dev.S_SIGN.value] = -1.0 if hp["maximize"] else 1.0
        return scal

    def _to_device(self, meta: np.ndarray, scal: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The int64 table and the float64 scalars, in one asynchronous copy from pinned memory on CUDA."""
        flat = np.concatenate([meta.ravel(), scal.view(np.int64).ravel()])
        if self.device.type == "cuda":
            host = torch.empty(flat.size, dtype=torch.int64, pin_memory=True)
            host.numpy()[:] = flat
            table = host.to(self.device, non_blocking=True)
        else:
            table = torch.from_numpy(flat)
        return table[:meta.size], table[meta.size:].view(torch.float64)

    def _launch(self, meta: torch.Tensor, scal: torch.Tensor, mutation: str | None) -> None:
        k, (row_at, col_at, tile_at, rv_at) = kernels(self.device), self.sizes
        new = lambda n: torch.empty(n, dtype=self.acc, device=self.device)  # noqa: E731
        p_part, u_part, coef = new(tile_at), new(tile_at), new(len(self.shapes))
        const = {"DT": dev.TL[self.dtype], "ACC": dev.TL[self.acc], "MUT": MUTATIONS[mutation]}
        tiles, grid = self.tile_table, (self.tile_table.shape[0],)
        finish = (meta, scal, p_part, u_part, coef, self.max_tiles)
        if not self.factored:
            k["vector_sums"][grid](meta, tiles, scal, u_part, p_part, BV=BV, **const)
            k["finish"][(len(self.shapes),)](*finish, BLOCK=1024, **const)
            k["vector_apply"][grid](meta, tiles, scal, coef, BV=BV, **const)
            return
        row_part, col_part, rv_part = new(row_at), new(col_at), new(rv_at)
        tile = {"BN": self.bn, "BM": self.bm}
        k["sums"][grid](meta, tiles, scal, row_part, col_part, p_part, **tile, **const)
        k["factors"][(self.factor_table.shape[0],)](meta, self.factor_table, scal, row_part, col_part, rv_part,
                                                    self.max_tm, self.max_tn, BR=BR, BC=BC, **const)
        k["update_sq"][grid](meta, tiles, scal, rv_part, u_part, self.max_nrb, **tile, RB=64, **const)
        k["finish"][(len(self.shapes),)](*finish, BLOCK=1024, **const)
        k["apply"][grid](meta, tiles, scal, rv_part, coef, self.max_nrb, **tile, RB=64, **const)


def tile(shape: torch.Size) -> tuple[int, int] | None:
    """A factored tensor's tile, (BN, BM): from its own last two dimensions only, so that its update does not depend
    on which other tensors share its param group (the order of its sums is the tile's); None for a vector."""
    if len(shape) < 2:
        return None
    return _pow2(shape[-2], 16, BN_MAX), _pow2(shape[-1], 16, BM_MAX)


def step_bucket(plans: dict, key: tuple, items: list[tuple], grads: list, steps: np.ndarray, hp: dict,
                mutation: str | None) -> None:
    """Step one bucket (its key's last entry: the tile, ``tile``) through its plan in ``plans`` (built, or rebuilt
    where a tensor moved, as needed)."""
    plan = plans.get(key)
    if plan is None or plan.built_for != Plan.signature(items):
        plan = plans[key] = Plan(items, tile=key[-1])
    plan.step(items, grads, steps, hp, mutation)
