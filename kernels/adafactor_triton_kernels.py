"""The Triton device code of optbench's Adafactor (the host side and the algorithm: kernels/adafactor_triton.py).

Every launch steps a bucket of tensors. A program finds its tensor and its tile in an int32 program table
(tensor index, program index within the tensor) and the tensor's addresses, shape and strides in an int64 table
of FW columns per tensor (F_*), its per-step scalars in a float64 table of SW columns (S_*). ``DT`` is the
tensors' dtype, ``ACC`` the arithmetic's (float32, or float64 for float64 tensors). ``MUT`` selects one of the
deliberately wrong variants the tests must catch (MUT_*, 0: none); it is a compile-time constant, so the
correct kernel carries none of their code.

Triton compiles them for the GPU, or with TRITON_INTERPRET=1 set before it is imported runs them in its
interpreter on CPU tensors (one mode a process: ``kernels(device)`` refuses the other in one line).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# the int64 table: per tensor
F_P, F_G, F_R, F_C, F_B, F_N, F_M = (tl.constexpr(i) for i in range(7))  # pointers (R: variance for vectors), shape
F_SPB, F_SPN, F_SGB, F_SGN = (tl.constexpr(i) for i in range(7, 11))  # strides of p and g (batch, row)
F_TN, F_TM, F_ROWP, F_COLP, F_TILE0, F_RVP, F_NRB, F_NT = (tl.constexpr(i) for i in range(11, 19))
FW = 20
# the float64 table: per tensor and step
S_W, S_DECAY, S_RHO, S_EPS1, S_EPS1SQ, S_EPS2, S_D, S_NUMEL, S_SIGN = (tl.constexpr(i) for i in range(9))
SW = 9
# the deliberately wrong variants (tests): update clipping without max(1, .); column sums of the first row of
# tiles only; variance clamped at eps1 instead of eps1^2; RMS(p) measured after weight decay
MUT_UNFLOORED, MUT_FIRST_ROW_TILE, MUT_UNSQUARED_EPS1, MUT_RMS_AFTER_DECAY = 1, 2, 3, 4
_FW, _SW = tl.constexpr(FW), tl.constexpr(SW)
_M1, _M2, _M3, _M4 = (tl.constexpr(i) for i in (1, 2, 3, 4))
_sum = tl.standard._sum_combine  # tl.sum's own combine: the interpreter reduces it in NumPy
TL = {torch.float32: tl.float32, torch.float64: tl.float64, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


@triton.jit
def _tile(meta, progs, pid, BN: tl.constexpr, BM: tl.constexpr):
    """A tile program's tensor (k, its table row, shape n x m, batch b) and tile (tn, tm over tiles_n x tiles_m: the
    rows and columns it covers)."""
    k, local = tl.load(progs + 2 * pid), tl.load(progs + 2 * pid + 1)
    row = meta + k * _FW
    n, m, tiles_n, tiles_m = tl.load(row + F_N), tl.load(row + F_M), tl.load(row + F_TN), tl.load(row + F_TM)
    tm, rest = local % tiles_m, local // tiles_m
    tn, b = rest % tiles_n, rest // tiles_n
    return k, row, n, m, b, tn, tm, tiles_n, tiles_m, tn * BN + tl.arange(0, BN), tm * BM + tl.arange(0, BM)


@triton.jit
def _at(row, pointer: tl.constexpr, batch_stride: tl.constexpr, row_stride: tl.constexpr, b, rows, cols,
        DT: tl.constexpr):
    """The addresses of a tile of the tensor whose pointer and strides are the table row's given columns."""
    base = tl.load(row + pointer).to(tl.pointer_type(DT)) + b * tl.load(row + batch_stride)
    return base + rows[:, None] * tl.load(row + row_stride) + cols[None, :]


@triton.jit
def _update(row, sc, rv_part, n, m, b, rows, cols, g, max_nrb, DT: tl.constexpr, ACC: tl.constexpr,
            MUT: tl.constexpr, RB: tl.constexpr):
    """u = g / sqrt(max(R_i C_j / max(S, eps1), eps1^2)) over a tile, S the mean of the tensor's (stored) row_var."""
    nrb = tl.load(row + F_NRB)
    rv = rv_part + tl.load(row + F_RVP) + b * nrb
    s_acc = tl.zeros([RB], dtype=ACC)
    for i in range(0, max_nrb, RB):  # loop bounds are arguments: Triton's interpreter takes no loaded ones
        s_acc += tl.load(rv + i + tl.arange(0, RB), mask=i + tl.arange(0, RB) < nrb, other=0.0)
    s = tl.reduce(s_acc, 0, _sum) / n.to(ACC)
    r = tl.load(tl.load(row + F_R).to(tl.pointer_type(DT)) + b * n + rows, mask=rows < n, other=1.0).to(ACC)
    c = tl.load(tl.load(row + F_C).to(tl.pointer_type(DT)) + b * m + cols, mask=cols < m, other=1.0).to(ACC)
    eps1 = tl.load(sc + S_EPS1).to(ACC)
    floor = eps1 if MUT == _M3 else tl.load(sc + S_EPS1SQ).to(ACC)
    return g / tl.sqrt(tl.maximum((r[:, None] * c[None, :]) / tl.maximum(s, eps1), floor))


@triton.jit
def _lerp(old, end, w):
    """torch's lerp: old + w (end - old), from the end's side for w >= 0.5."""
    return tl.where(w < 0.5, old + w * (end - old), end - (end - old) * (1.0 - w))


@triton.jit
def _lerped(base, stride, count, max_count, idx, limit, divisor, target, w, DT: tl.constexpr, ACC: tl.constexpr,
            SIZE: tl.constexpr):
    """A factor's new values at ``idx`` (< ``limit``): the mean of ``count`` partial sums (``stride`` apart from
    ``base``; over ``divisor`` elements) lerped into ``target`` with weight ``w``, stored there and returned."""
    total = tl.zeros([SIZE], dtype=ACC)
    for t in range(0, max_count):  # loop bounds are arguments: Triton's interpreter takes no loaded ones
        total += tl.load(base + t * stride + idx, mask=idx < tl.where(t < count, limit, 0), other=0.0)
    old = tl.load(target, mask=idx < limit, other=0.0).to(ACC)
    new = _lerp(old, total / divisor.to(ACC), w).to(DT)
    tl.store(target, new, mask=idx < limit)
    return new


@triton.jit
def sums(meta, progs, scal, row_part, col_part, p_part, DT: tl.constexpr, ACC: tl.constexpr, MUT: tl.constexpr,
         BN: tl.constexpr, BM: tl.constexpr):
    pid = tl.program_id(0)
    k, row, n, m, b, tn, tm, tiles_n, tiles_m, rows, cols = _tile(meta, progs, pid, BN, BM)
    mask = (rows < n)[:, None] & (cols < m)[None, :]
    g = tl.load(_at(row, F_G, F_SGB, F_SGN, b, rows, cols, DT), mask=mask, other=0.0).to(ACC)
    p = tl.load(_at(row, F_P, F_SPB, F_SPN, b, rows, cols, DT), mask=mask, other=0.0).to(ACC)
    if MUT == _M4:
        p = p * tl.load(scal + k * _SW + S_DECAY).to(ACC)
    g2 = g * g
    tl.store(row_part + tl.load(row + F_ROWP) + (b * tiles_m + tm) * n + rows, tl.reduce(g2, 1, _sum), mask=rows < n)
    tl.store(col_part + tl.load(row + F_COLP) + (b * tiles_n + tn) * m + cols, tl.reduce(g2, 0, _sum), mask=cols < m)
    tl.store(p_part + pid, tl.reduce(p * p, None, _sum))


@triton.jit
def factors(meta, progs, scal, row_part, col_part, rv_part, max_tm, max_tn, DT: tl.constexpr, ACC: tl.constexpr,
            MUT: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    pid = tl.program_id(0)
    k, local = tl.load(progs + 2 * pid), tl.load(progs + 2 * pid + 1)
    row = meta + k * _FW
    n, m, nrb = tl.load(row + F_N), tl.load(row + F_M), tl.load(row + F_NRB)
    per_b = nrb + (m + BC - 1) // BC
    b, blk = local // per_b, local % per_b
    w = tl.load(scal + k * _SW + S_W).to(ACC)
    if blk < nrb:  # rows: the row partials over the tiles of a row; the row block's sum of the stored row_var
        rows = blk * BR + tl.arange(0, BR)
        base = row_part + tl.load(row + F_ROWP) + b * tl.load(row + F_TM) * n
        r_ptr = tl.load(row + F_R).to(tl.pointer_type(DT)) + b * n + rows
        stored = _lerped(base, n, tl.load(row + F_TM), max_tm, rows, n, m, r_ptr, w, DT, ACC, BR)
        tl.store(rv_part + tl.load(row + F_RVP) + b * nrb + blk, tl.reduce(tl.where(rows < n, stored.to(ACC), 0.0), 0,
                                                                            _sum))
    else:  # columns: the column partials over the tiles of a column
        cols = (blk - nrb) * BC + tl.arange(0, BC)
        base = col_part + tl.load(row + F_COLP) + b * tl.load(row + F_TN) * m
        reduced = 1 if MUT == _M2 else tl.load(row + F_TN)
        c_ptr = tl.load(row + F_C).to(tl.pointer_type(DT)) + b * m + cols
        _lerped(base, m, reduced, max_tn, cols, m, n, c_ptr, w, DT, ACC, BC)


@triton.jit
def update_sq(meta, progs, scal, rv_part, u_part, max_nrb, DT: tl.constexpr, ACC: tl.constexpr, MUT: tl.constexpr,
              BN: tl.constexpr, BM: tl.constexpr, RB: tl.constexpr):
    pid = tl.program_id(0)
    k, row, n, m, b, tn, tm, tiles_n, tiles_m, rows, cols = _tile(meta, progs, pid, BN, BM)
    mask = (rows < n)[:, None] & (cols < m)[None, :]
    g = tl.load(_at(row, F_G, F_SGB, F_SGN, b, rows, cols, DT), mask=mask, other=0.0).to(ACC)
    u = _update(row, scal + k * _SW, rv_part, n, m, b, rows, cols, g, max_nrb, DT, ACC, MUT, RB)
    tl.store(u_part + pid, tl.reduce(tl.where(mask, u * u, 0.0), None, _sum))


@triton.jit
def finish(meta, scal, p_part, u_part, coef, max_tiles, DT: tl.constexpr, ACC: tl.constexpr, MUT: tl.constexpr,
           BLOCK: tl.constexpr):
    k = tl.program_id(0)
    row, sc = meta + k * _FW, scal + k * _SW
    first, count = tl.load(row + F_TILE0), tl.load(row + F_NT)
    sp, su = tl.zeros([BLOCK], dtype=ACC), tl.zeros([BLOCK], dtype=ACC)
    for i in range(0, max_tiles, BLOCK):
        idx = i + tl.arange(0, BLOCK)
        sp += tl.load(p_part + first + idx, mask=idx < count, other=0.0)
        su += tl.load(u_part + first + idx, mask=idx < count, other=0.0)
    numel = tl.load(sc + S_NUMEL).to(ACC)
    rms_p = tl.sqrt(tl.reduce(sp, 0, _sum) / numel)
    alpha = tl.maximum(tl.load(sc + S_EPS2).to(ACC), rms_p) * tl.load(sc + S_RHO).to(ACC)
    clipped = tl.sqrt(tl.reduce(su, 0, _sum) / numel) / tl.load(sc + S_D).to(ACC)
    denom = clipped if MUT == _M1 else tl.maximum(clipped, 1.0)
    tl.store(coef + k, alpha / denom)


@triton.jit
def apply(meta, progs, scal, rv_part, coef, max_nrb, DT: tl.constexpr, ACC: tl.constexpr, MUT: tl.constexpr,
          BN: tl.constexpr, BM: tl.constexpr, RB: tl.constexpr):
    pid = tl.program_id(0)
    k, row, n, m, b, tn, tm, tiles_n, tiles_m, rows, cols = _tile(meta, progs, pid, BN, BM)
    sc = scal + k * _SW
    mask = (rows < n)[:, None] & (cols < m)[None, :]
    g = tl.load(_at(row, F_G, F_SGB, F_SGN, b, rows, cols, DT), mask=mask, other=0.0).to(ACC)
    p_ptrs = _at(row, F_P, F_SPB, F_SPN, b, rows, cols, DT)
    p = tl.load(p_ptrs, mask=mask, other=0.0).to(ACC)
    u = _update(row, sc, rv_part, n, m, b, rows, cols, g * tl.load(sc + S_SIGN).to(ACC), max_nrb, DT, ACC, MUT, RB)
    new = p * tl.load(sc + S_DECAY).to(ACC) - tl.load(coef + k) * u
    tl.store(p_ptrs, new.to(DT), mask=mask)


@triton.jit
def _span(meta, progs, scal, pid, BV: tl.constexpr):
    """A vector program's tensor (k, its table rows) and the elements it covers (offsets, in-bounds mask)."""
    k, local = tl.load(progs + 2 * pid), tl.load(progs + 2 * pid + 1)
    row = meta + k * _FW
    offs = local * BV + tl.arange(0, BV)
    return k, row, scal + k * _SW, offs, offs < tl.load(row + F_M)


@triton.jit
def vector_sums(meta, progs, scal, u_part, p_part, DT: tl.constexpr, ACC: tl.constexpr, MUT: tl.constexpr,
                BV: tl.constexpr):
    pid = tl.program_id(0)
    k, row, sc, offs, mask = _span(meta, progs, scal, pid, BV)
    g = tl.load(tl.load(row + F_G).to(tl.pointer_type(DT)) + offs, mask=mask, other=0.0).to(ACC)
    p = tl.load(tl.load(row + F_P).to(tl.pointer_type(DT)) + offs, mask=mask, other=0.0).to(ACC)
    v_ptrs = tl.load(row + F_R).to(tl.pointer_type(DT)) + offs
    old = tl.load(v_ptrs, mask=mask, other=0.0).to(ACC)
    w = tl.load(sc + S_W).to(ACC)
    g2 = g * g
    new = _lerp(old, g2, w).to(DT)
    tl.store(v_ptrs, new, mask=mask)
    floor = tl.load(sc + S_EPS1).to(ACC) if MUT == _M3 else tl.load(sc + S_EPS1SQ).to(ACC)
    u = g / tl.sqrt(tl.maximum(new.to(ACC), floor))
    if MUT == _M4:
        p = p * tl.load(sc + S_DECAY).to(ACC)
    tl.store(u_part + pid, tl.reduce(tl.where(mask, u * u, 0.0), 0, _sum))
    tl.store(p_part + pid, tl.reduce(p * p, 0, _sum))


@triton.jit
def vector_apply(meta, progs, scal, coef, DT: tl.constexpr, ACC: tl.constexpr, MUT: tl.constexpr, BV: tl.constexpr):
    pid = tl.program_id(0)
    k, row, sc, offs, mask = _span(meta, progs, scal, pid, BV)
    g = tl.load(tl.load(row + F_G).to(tl.pointer_type(DT)) + offs, mask=mask, other=0.0).to(ACC)
    p_ptrs = tl.load(row + F_P).to(tl.pointer_type(DT)) + offs
    p = tl.load(p_ptrs, mask=mask, other=0.0).to(ACC)
    v = tl.load(tl.load(row + F_R).to(tl.pointer_type(DT)) + offs, mask=mask, other=1.0).to(ACC)
    floor = tl.load(sc + S_EPS1).to(ACC) if MUT == _M3 else tl.load(sc + S_EPS1SQ).to(ACC)
    u = g * tl.load(sc + S_SIGN).to(ACC) / tl.sqrt(tl.maximum(v, floor))
    new = p * tl.load(sc + S_DECAY).to(ACC) - tl.load(coef + k) * u
    tl.store(p_ptrs, new.to(DT), mask=mask)


KERNELS = {fn.__name__: fn for fn in (sums, factors, update_sq, finish, apply, vector_sums, vector_apply)}
INTERPRET = bool(triton.knobs.runtime.interpret)  # TRITON_INTERPRET=1 when triton was imported: CPU tensors


def kernels(device: torch.device) -> dict:
    """The kernels by name, or RuntimeError in one line where this process's Triton cannot run them on ``device``:
    Triton decides at import whether it compiles for the GPU or interprets on the CPU (TRITON_INTERPRET=1)."""
    if device.type == "cpu" and not INTERPRET:
        raise RuntimeError("optbench's Triton Adafactor steps CPU tensors only in Triton's interpreter: set "
                           "TRITON_INTERPRET=1 before the process starts")
    if device.type != "cpu" and INTERPRET:
        raise RuntimeError(f"TRITON_INTERPRET=1 is set: Triton would interpret the kernels on the host, not run them "
                           f"on {device.type}; unset it")
    return KERNELS
