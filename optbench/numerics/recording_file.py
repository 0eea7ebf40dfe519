"""A ``Recording`` as one file another process can judge without running anything the recording process wrote.

The file is a NumPy ``.npz`` read with ``allow_pickle=False``: one flat array per storage dtype (``float32``...)
and one text array, ``manifest``, JSON naming what each recorded array is (``[storage dtype, offset, shape]``;
format ``optbench-recording``, ``FORMAT_VERSION``). Each array is stored in float32 (complex64) where that holds it
exactly, else in float64 (complex128), and read back as float64 (complex128), read-only; a step's ``before``
snapshot keeps only what differs from the step before's ``after``. The gradients are not stored: they are the
workload's, which the judge rebuilds from the seed (``of_the_case``).
What a learning rate was held in (a Tensor's dtype) is kept, since the judge reads it (``scheduled_lr``).

``load_recording`` checks the manifest's shape and types; whether the recording is of the case planned (names,
steps, shapes, dtype) is for the judge to check against its own workload (``engine.judge``).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from optbench.numerics.recording import RecordedStep, Recording, as_array
from optbench.results import atomic_write
from optbench.rows import bounded
from optbench.workloads import Workload, reference_gradient

FORMAT = "optbench-recording"
FORMAT_VERSION = 1
NARROW = {"f": (np.float32, np.float64), "c": (np.complex64, np.complex128)}  # kind: (narrow, wide)


class RecordingError(ValueError):
    """A file that is not a well-formed optbench recording: one line saying what is wrong."""


def save_recording(recording: Recording, path: Path) -> Path:
    """Write ``recording`` to ``path`` (``.npz``), through a temporary file renamed into place."""
    arrays: list[tuple[list, np.ndarray]] = []  # (where it is stored: filled in by _pooled, the array)

    def stored(value: np.ndarray) -> list:
        arrays.append(([], np.asarray(value)))
        return arrays[-1][0]

    def table(snap: dict | None, unless: dict | None = None) -> list | None:
        if snap is None:
            return None
        return [[fqn, key, stored(a)] for (fqn, key), a in snap.items()
                if unless is None or not _same(unless.get((fqn, key)), a)]

    steps, last = [], None
    for taken in recording.steps:
        steps.append({"after": table(taken.after), "before": table(taken.before, last),
                      "lrs": {n: _lr_out(lr) for n, lr in taken.lrs.items()},
                      "model": [[n, stored(t.to(torch.float64).numpy()), str(t.dtype).removeprefix("torch.")]
                                for n, t in taken.model.items()],
                      "closure": taken.grads is None})
        last = taken.after
    manifest = {"format": FORMAT, "version": FORMAT_VERSION, "names": list(recording.names),
                "start": [[n, stored(a)] for n, a in recording.start.items()],
                "judged": str(recording.judged).removeprefix("torch."), "masters": bool(recording.masters),
                "frozen": list(recording.frozen), "steps": steps,
                "kept": [[f, t, str(k)] for (f, t), k in recording.kept.items()],
                "breaches": [[f, t, str(w)] for (f, t), w in recording.breaches.items()],
                "contract": [[int(s), f, t] for s, f, t, *_ in recording.contract]}
    pools = _pooled(arrays)  # (fills in each array's place in the manifest)
    return _written(path, manifest=np.array(json.dumps(manifest)), **pools)


@dataclass(frozen=True)
class Raised:
    """What a recorded run raised instead of finishing: its exception's class names, most derived first (its MRO),
    and its message; the judge matches them against a declared raise."""

    names: tuple[str, ...]
    message: str

    def exception(self) -> Exception:
        """An exception with the same class names (the nearest of Python's own classes as its base) and message."""
        import builtins

        base = next((getattr(builtins, n) for n in self.names if isinstance(getattr(builtins, n, None), type)
                     and issubclass(getattr(builtins, n), Exception)), Exception)
        cls = base
        for name in reversed(self.names[:self.names.index(base.__name__)] if base.__name__ in self.names
                             else self.names[:1]):
            cls = type(name, (cls,), {})
        try:
            exc = cls(self.message)
        except TypeError:  # a class that takes other arguments (UnicodeDecodeError): the names are what matter
            exc = type(self.names[0], (Exception,), {})(self.message)
        exc.recorded_names = self.names  # matched by name where a class is not Python's (never imported to match)
        return exc


def raised_data(exc: BaseException) -> dict:
    """What ``exc`` was, as JSON data: its class names (its MRO) and its message (``Raised``)."""
    return {"names": [c.__name__ for c in type(exc).__mro__ if c is not object], "message": bounded(str(exc))}


def raised_from(data: dict) -> Raised:
    return Raised(tuple(str(n) for n in data["names"]), str(data["message"]))


def save_raised(exc: BaseException, path: Path) -> Path:
    """Write what ``exc`` was (``Raised``) to ``path``, a recording with no steps."""
    return _written(path, manifest=np.array(json.dumps({"format": FORMAT, "version": FORMAT_VERSION,
                                                        "raised": raised_data(exc)})))


@dataclass(frozen=True)
class Answers:
    """What code under test answered, in order, where a check asks it things rather than steps it (the error
    inputs, a state_dict round-trip): JSON entries the check writes and reads back itself
    (``checks.error_attempts.Answering``, ``checks.tape.Tape``), NumPy arrays among their values."""

    entries: tuple


def save_answers(entries: list, path: Path) -> Path:
    """Write a check's ``Answers`` to ``path``, a recording with no steps; each array in them is stored as a
    recorded tensor is (``{"array": where}`` in the manifest)."""
    arrays: list[tuple[list, np.ndarray]] = []

    def out(value):
        if isinstance(value, np.ndarray):
            arrays.append(([], value))
            return {"array": arrays[-1][0]}
        if isinstance(value, dict):
            return {str(k): out(v) for k, v in value.items()}
        return [out(v) for v in value] if isinstance(value, (list, tuple)) else value
    answers = out(list(entries))
    pools = _pooled(arrays)  # (fills in each array's place)
    return _written(path, manifest=np.array(json.dumps({"format": FORMAT, "version": FORMAT_VERSION,
                                                        "answers": answers})), **pools)


def _written(path: Path, **arrays) -> Path:
    """``arrays`` as an ``.npz`` at ``path``, written atomically (``results.atomic_write``)."""
    data = io.BytesIO()
    np.savez(data, **arrays)
    atomic_write(Path(path), data.getvalue())
    return Path(path)


def load_recording(path: Path, max_bytes: int | None = None) -> Recording | Raised | Answers:
    """A recording read back (``RecordingError`` for a file that is not one, or that would unpack to more than
    ``max_bytes``), its gradients left out (a gradient-driven step's ``grads`` is ``{}``): ``of_the_case`` checks it
    and puts the workload's in."""
    try:
        if max_bytes is not None:  # what its members unpack to, before any is read (a zip can be a bomb)
            with zipfile.ZipFile(Path(path)) as archive:
                unpacked = sum(info.file_size for info in archive.infolist())
            if unpacked > max_bytes:
                raise RecordingError(f"{Path(path).name}: unpacks to {unpacked:,} bytes, more than the "
                                     f"{max_bytes:,} a recording of this case can hold")
        with np.load(Path(path), allow_pickle=False) as data:
            manifest = json.loads(str(data["manifest"][()]))
            pools = {k: data[k] for k in data.files if k != "manifest"}
    except RecordingError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise RecordingError(f"{Path(path).name}: not a readable recording ({type(exc).__name__}: {exc})") from None
    try:
        if manifest.get("format") == FORMAT and manifest.get("version") == FORMAT_VERSION:
            if "raised" in manifest:
                return raised_from(manifest["raised"])
            if "answers" in manifest:
                if not isinstance(manifest["answers"], list) or not all(isinstance(a, dict)
                                                                        for a in manifest["answers"]):
                    raise ValueError("its answers are not a list of objects")
                array = _arrays(pools)

                def back(value):
                    if isinstance(value, dict):
                        return array(value["array"]) if set(value) == {"array"} else {
                            k: back(v) for k, v in value.items()}
                    return [back(v) for v in value] if isinstance(value, list) else value
                return Answers(tuple(back(a) for a in manifest["answers"]))
        return _recording(manifest, pools)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise RecordingError(f"{Path(path).name}: not a well-formed recording ({type(exc).__name__}: {exc})") from None


def largest(workload: Workload) -> int:
    """The most bytes a recording of ``workload`` may unpack to: per step, its parameters and up to 64 times as many
    state elements, before and after, in float64 (a generous bound: Adam keeps 2, a Shampoo's preconditioners more),
    and a megabyte for the manifest."""
    return (workload.steps + 1) * 2 * 65 * workload.numel * 16 + (1 << 20)  # (16: complex128)


def of_the_case(recording: Recording, workload: Workload, dtype: torch.dtype, device: torch.device) -> Recording:
    """``recording`` checked against the case the judge planned (``RecordingError`` naming the first thing that
    differs: its parameters' names, which take no gradient, its number of steps, the precision it was judged in, a
    parameter's shape after a step), with the judge's own start and gradients: the workload's parameters rounded to
    ``dtype`` (a recording that started elsewhere is refused) and, per gradient-driven step, the workload's
    gradients as ``record_trajectory`` captured them (never read from the file)."""
    params = workload.materialize(dtype, device)
    start = {n: as_array(p) for n, p in params.items()}
    frozen = [n for n, p in params.items() if not p.requires_grad]
    for what, theirs, ours in (("parameter names", recording.names, list(params)),
                               ("parameters taking no gradient", recording.frozen, frozen),
                               ("steps", len(recording.steps), workload.steps),
                               ("precision judged in", recording.judged, dtype),
                               ("float32 masters", recording.masters, False)):
        if theirs != ours:
            raise RecordingError(f"the recording's {what} ({bounded(str(theirs), 120)}) are not the case's "
                                 f"({bounded(str(ours), 120)})")
    if set(recording.start) != set(start) or not all(_same(recording.start[n], a) for n, a in start.items()):
        raise RecordingError("the recording started from other parameters than the workload's")
    steps = []
    for i, taken in enumerate(recording.steps):
        for n, a in start.items():
            got = taken.after.get((n, "param"))
            if got is None or got.shape != a.shape:
                raise RecordingError(f"step {i + 1}: the recording holds no parameter {n} of shape {a.shape}")
        grads = None if taken.grads is None else {n: reference_gradient(workload.gradient(i, n, p))
                                                   if p.requires_grad else None for n, p in params.items()}
        steps.append(replace(taken, grads=grads))
    return replace(recording, start=start, steps=steps)


def _recording(manifest: dict, pools: dict) -> Recording:
    if manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
        raise ValueError(f"format {manifest.get('format')!r} version {manifest.get('version')!r}, "
                         f"expected {FORMAT!r} version {FORMAT_VERSION}")
    array = _arrays(pools)

    def snap(rows, last=None) -> dict | None:
        if rows is None:
            return None
        out = dict(last or {})
        out.update({(str(f), str(k)): array(i) for f, k, i in rows})
        return out

    out = Recording([str(n) for n in manifest["names"]], {str(n): array(i) for n, i in manifest["start"]},
                    _dtype(manifest["judged"]),
                    bool(manifest["masters"]), [str(n) for n in manifest["frozen"]])
    last = None
    for step in manifest["steps"]:
        after = snap(step["after"])
        before = snap(step["before"], last) if step["before"] is not None else None
        model = {str(n): torch.from_numpy(array(i).copy()).to(_dtype(d)) for n, i, d in step["model"]}
        out.steps.append(RecordedStep(None if step["closure"] else {}, after, before,
                                      {str(n): _lr_in(v) for n, v in step["lrs"].items()}, model))
        last = after
    out.kept = {(str(f), str(t)): str(k) for f, t, k in manifest["kept"]}
    out.breaches = {(str(f), str(t)): str(w) for f, t, w in manifest["breaches"]}
    out.contract = [(int(s), str(f), str(t), float("inf"), 0.0) for s, f, t in manifest["contract"]]
    return out


def _arrays(pools: dict) -> Callable[[list], np.ndarray]:
    """Where an array is stored (``[storage dtype, offset, shape]``) -> the array, float64 (complex128), read-only."""
    wide = {}
    for key, pool in pools.items():
        if pool.dtype.kind not in NARROW or pool.ndim != 1:
            raise ValueError(f"array {key} is of dtype {pool.dtype}, {pool.ndim}-D")
        wide[key] = pool.astype(np.complex128 if pool.dtype.kind == "c" else np.float64)
        wide[key].flags.writeable = False  # each array a read-only view: a reference that writes into one raises

    def array(where) -> np.ndarray:
        key, offset, shape = str(where[0]), int(where[1]), tuple(int(n) for n in where[2])
        size = int(np.prod(shape, dtype=np.int64))
        if key not in wide or offset < 0 or offset + size > wide[key].size or min(shape, default=0) < 0:
            raise ValueError(f"an array at {offset} of shape {shape} lies outside {key}")
        return wide[key][offset:offset + size].reshape(shape)
    return array


def _pooled(arrays: list[tuple[list, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays as one flat array per storage dtype, each array in the narrower of its kind's two dtypes
    (float32 or float64, complex64 or complex128) that holds every element exactly; each ``where`` filled in with
    ``[storage dtype, offset, shape]``. Decided for all arrays of a kind at once (a recording holds thousands)."""
    pools: dict[str, list[np.ndarray]] = {}
    sizes: dict[str, int] = {}
    for kind, (narrow, wide) in NARROW.items():
        mine = [(where, a) for where, a in arrays if (a.dtype.kind == "c") == (kind == "c")]
        if any(a.dtype.kind not in "fciub" for _, a in mine):
            raise TypeError("a recording holds numbers only")
        if not mine:
            continue
        flat = np.concatenate([a.astype(wide).reshape(-1) for _, a in mine])
        with np.errstate(over="ignore", invalid="ignore"):
            inexact = (flat.astype(narrow).astype(wide) != flat) & (flat == flat)  # NaN survives the round trip
        starts = np.cumsum([0] + [a.size for _, a in mine[:-1]])
        sized = np.array([a.size > 0 for _, a in mine])
        needs_wide = np.zeros(len(mine), dtype=bool)
        if sized.any():
            needs_wide[sized] = np.logical_or.reduceat(inexact, starts[sized]) if inexact.size else False
        for (where, a), start, keep in zip(mine, starts, needs_wide):
            dtype = np.dtype(wide if keep else narrow)
            key = dtype.str.lstrip("<>=|")
            where.extend([key, sizes.get(key, 0), list(a.shape)])
            sizes[key] = sizes.get(key, 0) + a.size
            pools.setdefault(key, []).append(flat[start:start + a.size].astype(dtype))
    return {key: np.concatenate(pool) for key, pool in pools.items()}


def _same(a, b) -> bool:
    return a is not None and a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def _lr_out(lr):
    if isinstance(lr, torch.Tensor):
        return {"tensor": str(lr.dtype).removeprefix("torch."), "values": lr.to(torch.float64).reshape(-1).tolist(),
                "shape": list(lr.shape)}
    return float(lr)


def _lr_in(value):
    if isinstance(value, dict):
        values = torch.tensor([float(v) for v in value["values"]], dtype=torch.float64)
        return values.to(_dtype(value["tensor"])).reshape([int(s) for s in value["shape"]])
    return float(value)


def _dtype(name) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{name!r} is no torch dtype")
    return dtype
