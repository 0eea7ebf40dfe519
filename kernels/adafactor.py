"""optbench's own Adafactor: torch.optim.Adafactor's math fused, in C++ for CPU tensors and in Triton for CUDA ones
(kernels/adafactor_triton.py; ``TritonAdafactor`` steps CPU tensors through Triton too, in its interpreter).

A drop-in replacement for ``torch.optim.Adafactor`` (torch 2.13): same constructor, argument checks,
error messages and state (``step`` a float32 0-dim tensor; ``row_var`` [..., n, 1] and ``col_var``
[..., 1, m] for tensors of two or more dimensions, ``variance`` for the rest, in the parameter's dtype),
so state dicts move between the two. ``foreach`` is accepted and ignored: there is one implementation.
Only the evaluation order differs from torch; per step t, for each parameter with a gradient::

    rho = min(lr, 1/sqrt(t)); alpha = max(eps2, RMS(p)) * rho; one_minus_beta2 = t**beta2_decay
    row_var += (mean_{-1}(g^2) - row_var) * one_minus_beta2      (col_var alike, over dim -2)
    v = row_var @ col_var / max(mean_{-2}(row_var), eps1)
    u = g / sqrt(max(v, eps1^2)); p = p * (1 - lr*wd) - alpha / max(1, RMS(u)/d) * u

A factored tensor (kernels/csrc/adafactor_math.cpp) takes three passes over g and never materialises v or u:
(1) row and column sums of g^2; then the O(n + m) factor update, keeping ra_i = 1/sqrt(row_var_i / max(
mean(row_var), eps1)) and rc_j = 1/sqrt(col_var_j), so that 1/sqrt(max(v_ij, eps1^2)) = min(ra_i rc_j,
1/eps1); (2) sums of u^2 and p^2 (p before weight decay); (3) the update, p read and written once. One
C++ call steps a param group, in one parallel region of ``at::parallel_for`` (torch.get_num_threads()
threads, OpenMP in torch's CPU builds): each pass is a list of fixed tiles that threads take as they come
free, and whoever finishes a pass's last tile runs the serial stage after it. Sums are in double (float
squares summed at most 8 to a vector lane in float first; float64 squares compensated), kept per row,
tile or row block and reduced in a fixed order: a step is bit-reproducible whatever the thread count. Elementwise
arithmetic is in float for float32/bfloat16/float16 (rounded once into p and the state, torch's
"opmath") and in double for float64; vectors and 0-dim tensors (``variance``) are computed in double.
A column-major weight is stepped in place through its transpose (rows and columns swap roles in memory,
not in the factors); other non-contiguous tensors through contiguous copies written back.

Deliberate differences, none in the math: eps1 = None means the eps of each parameter's own dtype
(torch takes the group's first parameter's, finding F19); a zero-size parameter gets its state and step
and nothing else (torch raises ZeroDivisionError, finding F04). The extension is built on first use with
``torch.utils.cpp_extension.load`` (cached in TORCH_EXTENSIONS_DIR); if it cannot be, the constructor raises
RuntimeError("optbench's Adafactor kernel could not be built: ..."), as it does, in one line, where the Triton
kernels cannot run (no triton; CPU tensors without TRITON_INTERPRET=1).
"""

from __future__ import annotations

import pathlib
import time
from contextlib import contextmanager

import torch
from torch import Tensor
from torch.optim import Optimizer

__all__ = ["Adafactor", "TritonAdafactor", "build"]

SOURCES = [pathlib.Path(__file__).with_name("csrc") / name for name in ("adafactor.cpp", "adafactor_math.cpp")]
_BUILT: dict = {}


def _flags() -> tuple[str, list[str], list[str]]:
    """Name suffix, compiler and linker flags: AVX2 where the CPU has it (the same results either way: no
    FMA contraction); OpenMP where torch's at::parallel_for is OpenMP's (inline: without it, one thread)."""
    flags = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-Wno-psabi"]  # (psabi: inline vector helpers only)
    omp = ["-fopenmp"] if torch._C.has_openmp else []
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        return "avx2", flags + omp + ["-mavx2", "-mf16c"], omp
    return "generic", flags + omp, omp


def build():
    """The compiled extension's operators (``build().step``), built once per process, cached on disk by torch."""
    if "module" not in _BUILT:
        if "error" in _BUILT:
            raise RuntimeError(_BUILT["error"])
        try:
            from torch.utils.cpp_extension import load

            suffix, cflags, ldflags = _flags()
            name = f"optbench_adafactor_{suffix}"
            with _build_guard(name):
                load(name=name, sources=[str(s) for s in SOURCES], extra_cflags=cflags, extra_ldflags=ldflags,
                     is_python_module=False, verbose=False)  # (registers the operator torch.ops.<name>.step)
            _BUILT["module"] = getattr(torch.ops, name)
        except Exception as exc:
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
            reason = next((ln for ln in lines if "error" in ln.lower() and ln != lines[0]), lines[0])
            _BUILT["error"] = f"optbench's Adafactor kernel could not be built: {reason[:300]}"
            raise RuntimeError(_BUILT["error"]) from None
    return _BUILT["module"]


@contextmanager
def _build_guard(name: str, patience_s: float = 900.0):
    """Hold an exclusive ``flock`` on the extension's build folder while torch loads (and builds) it, and remove a
    ``lock`` file of torch's that no one holds. torch guards a build with a plain file (``FileBaton``) that a process
    killed mid-build leaves behind, after which every process waits on it forever (a run stopped by SIGTERM at the
    wrong moment hung every later run); the kernel releases a flock with its holder. RuntimeError, in one line, after
    ``patience_s`` of another process building."""
    try:
        import fcntl

        from torch.utils.cpp_extension import _get_build_directory
    except ImportError:  # not POSIX, or a torch without it: torch's own lock alone
        yield
        return
    folder = pathlib.Path(_get_build_directory(name, verbose=False))
    with open(folder / "optbench.flock", "w") as guard:
        deadline = time.monotonic() + patience_s
        while True:
            try:
                fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"another process has been building {name} in {folder} for "
                                       f"{patience_s:.0f} s") from None
                time.sleep(0.2)
        (folder / "lock").unlink(missing_ok=True)  # every optbench build holds the flock first: nobody holds this
        try:
            yield
        finally:
            fcntl.flock(guard, fcntl.LOCK_UN)


def _scalar_dtype() -> torch.dtype:
    """The dtype of ``step``, as torch picks it: float32 unless the default dtype is float64."""
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


def _step_fits(step) -> bool:
    """Whether the C++ kernel steps ``step`` in place: a CPU float32 or float64 scalar tensor (torch's own)."""
    return (torch.is_tensor(step) and step.device.type == "cpu" and step.numel() == 1
            and step.dtype in (torch.float32, torch.float64))


class Adafactor(Optimizer):
    """torch.optim.Adafactor's algorithm fused: one C++ step per param group on CPU, Triton kernels on CUDA
    (module docstring)."""

    backend = "auto"  # "auto": C++ for CPU tensors, Triton for the rest; "triton": Triton for all (TritonAdafactor)
    _mutation: str | None = None  # a deliberately wrong variant (optbench.mutants.adafactor_triton); None: correct

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {"lr": lr, "beta2_decay": beta2_decay, "eps": eps, "d": d, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize}
        super().__init__(params, defaults)
        devices = {p.device.type for g in self.param_groups for p in g["params"]}
        if "cpu" in devices and self.backend == "auto":
            build()
        for device in sorted(devices - ({"cpu"} if self.backend == "auto" else set())):
            _triton().kernels(torch.device(device))  # RuntimeError in one line where Triton cannot run them

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
        # (load_state_dict ends here too) a step torch's Adafactor would count on, a Python number or an integer
        # tensor, as the CPU float scalar the kernel counts in, its value kept
        for p_state in self.state.values():
            if "step" in p_state and not _step_fits(p_state["step"]):
                p_state["step"] = torch.tensor(float(p_state["step"]), dtype=_scalar_dtype())

    @torch.no_grad()
    def step(self, closure=None):
        """Perform a single optimization step (``closure``: reevaluates the model and returns the loss)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for index, group in enumerate(self.param_groups):
            params, grads, steps, row_vars, col_vars, variances = [], [], [], [], [], []
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if torch.is_complex(p):
                    raise RuntimeError("Adafactor does not support complex parameters")
                if grad.is_sparse:
                    raise RuntimeError("Adafactor does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.tensor(0.0, dtype=_scalar_dtype())
                    if grad.dim() > 1:
                        state["row_var"] = grad.new_zeros(grad.shape[:-1] + (1,))
                        state["col_var"] = grad.new_zeros(grad.shape[:-2] + (1,) + grad.shape[-1:])
                    else:
                        state["variance"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
                params.append(p)
                grads.append(grad)
                steps.append(state["step"])
                row_vars.append(state.get("row_var"))
                col_vars.append(state.get("col_var"))
                variances.append(state.get("variance"))
            if not params:
                continue
            lr = group["lr"]
            eps1, eps2 = group["eps"]
            hp = {"lr": float(lr.item() if isinstance(lr, Tensor) else lr), "beta2_decay": float(group["beta2_decay"]),
                  "eps1": None if eps1 is None else float(eps1), "eps2": float(eps2), "d": float(group["d"]),
                  "weight_decay": float(group["weight_decay"]), "maximize": bool(group["maximize"])}
            on_cpu = [i for i, p in enumerate(params) if p.device.type == "cpu" and self.backend == "auto"]
            if on_cpu:
                pick = lambda xs: [xs[i] for i in on_cpu]  # noqa: E731
                mutated = [pick(params), pick(steps), pick(row_vars), pick(col_vars), pick(variances)]
                build().step(mutated[0], pick(grads), *mutated[1:], hp["lr"], hp["beta2_decay"], hp["eps1"], hp["eps2"],
                             hp["d"], hp["weight_decay"], hp["maximize"])
                # written through their memory: autograd must see them changed (the stable ABI cannot say so)
                torch.autograd.graph.increment_version([t for ts in mutated for t in ts if t is not None])
            rest = [i for i in range(len(params)) if i not in set(on_cpu)] if on_cpu else range(len(params))
            if rest:
                if getattr(self, "_triton_plans", None) is None:  # per bucket; not state: never saved
                    self._triton_plans = {}
                _triton_step(self._triton_plans, index,
                             [(params[i], grads[i], steps[i], row_vars[i], col_vars[i], variances[i]) for i in rest],
                             hp, self._mutation)
        return loss


class TritonAdafactor(Adafactor):
    """optbench's Adafactor through its Triton kernels on every device: CUDA tensors compiled, CPU tensors in
    Triton's interpreter (slow; how CI verifies the kernel without a GPU)."""

    backend = "triton"


def _triton():
    """The Triton host module, or RuntimeError in one line when Triton is not installed."""
    try:
        from . import adafactor_triton
    except ImportError as exc:
        raise RuntimeError(f"optbench's Triton Adafactor needs triton (pip install -e '.[triton]'): {exc}") from None
    return adafactor_triton


def _triton_step(plans: dict, group_index: int, items: list[tuple], hp: dict, mutation: str | None) -> None:
    """Advance each tensor's step, then step each bucket (device, dtype, tile or vector) through its cached plan."""
    import numpy as np

    kernel = _triton()
    steps = [item[2] for item in items]
    torch._foreach_add_(steps, 1)
    buckets: dict[tuple, tuple[list, list, list]] = {}
    for (p, g, step_t, row_var, col_var, variance), step in zip(items, steps):
        if p.numel() == 0:  # state and step only (torch divides by numel here: F04)
            continue
        if p.dtype not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            raise RuntimeError(f"optbench's Triton Adafactor does not step {p.dtype} parameters")
        if g.device != p.device or g.dtype != p.dtype:
            raise RuntimeError("optbench's Triton Adafactor needs each gradient on its parameter's device and dtype")
        tile = kernel.tile(p.shape)  # a tensor's own (a bucket per tile: results independent of the grouping)
        tensors, grads, values = buckets.setdefault((group_index, p.device, p.dtype, tile), ([], [], []))
        tensors.append((p, row_var, col_var) if tile else (p, variance, None))
        grads.append(g)
        values.append(step.item())
    for key, (tensors, grads, values) in buckets.items():
        kernel.step_bucket(plans, key, tensors, grads, np.asarray(values, dtype=np.float64), hp, mutation)
