"""The run history: every run's results.json kept by machine and torch version, as asv keeps its results.

Layout: ``<history_dir>/<machine>/<torch>/<UTC time>-<git sha[:8] | nogit>[+dirty]-<suites>-<device>.json``, each
file a byte-for-byte copy of the run's ``results.json`` (written atomically, never over another run's
file). ``machine`` is a readable, filesystem-safe slug of the CPU model and thread count (and the GPU),
e.g. ``intel-xeon-platinum-8375c-2.90ghz-2t``. The runner records every run when ``history_dir`` is set
(``suites/config.yaml``; null disables). ``read_history`` reads history folders, run folders and results
files back into one tidy frame: the result rows plus the run's ``run``, ``created``, ``git_sha``,
``machine`` and ``torch``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import pandas as pd

from optbench.results import COLUMNS, load_results
from optbench.suites import CONFIG_MODULE

RUN_COLUMNS = ["run", "created", "git_sha", "machine", "torch", "cpu", "cpu_threads", "gpu", "suites", "device",
               "wall_s", "path"]
EXTRA = ["run", "created", "git_sha", "machine", "torch"]  # the run's columns added to every row


def _slug(text: str, keep: str = "a-z0-9.") -> str:
    return re.sub(r"-{2,}", "-", re.sub(f"[^{keep}]+", "-", text.lower())).strip("-.")


def machine_slug(machine: dict) -> str:
    """``intel-xeon-platinum-8375c-2.90ghz-2t`` (+ ``-nvidia-h100-80gb-hbm3``): CPU model, threads, GPU."""
    cpu = re.sub(r"\((r|tm|c)\)|\b(cpu|processor|with radeon graphics)\b|@", " ",
                 str(machine.get("cpu") or "unknown-cpu"), flags=re.IGNORECASE)
    parts = [_slug(cpu)[:60] or "unknown-cpu", f"{machine.get('cpu_threads') or '?'}t"]
    if machine.get("gpu"):
        parts.append(_slug(str(machine["gpu"]))[:40])
    return "-".join(parts).replace("?t", "unknown-threads")


def _torch_dir(machine: dict) -> str:
    return _slug(str(machine.get("torch") or "unknown-torch"), keep="a-z0-9.+") or "unknown-torch"


def _suites(meta: dict) -> str:
    suite = ((meta.get("config") or {}).get("suite") or {}).get("name")
    return _slug(suite or "+".join(meta.get("suites") or []) or "nosuite", keep="a-z0-9+_")[:60]


def _device(meta: dict) -> str:
    return _slug(((meta.get("config") or {}).get("device") or {}).get("name") or "nodevice")


def _stamp(created) -> str:
    try:
        when = datetime.fromisoformat(str(created))
    except ValueError:
        return "notime"
    when = when.replace(tzinfo=when.tzinfo or timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def run_name(meta: dict) -> str:
    """``20250514T120304Z-b902603a-adam-cpu``: when (UTC), commit, suites and device of one run."""
    info = meta.get("machine") or {}
    sha = (info.get("git_sha") or "")[:8] or "nogit"
    sha += "+dirty" if info.get("git_dirty") else ""
    return f"{_stamp(meta.get('created'))}-{sha}-{_suites(meta)}-{_device(meta)}"


def default_history_dir() -> str | None:
    """``history_dir`` of the packaged ``suites/config.yaml`` (None when it is null)."""
    from omegaconf import OmegaConf

    with resources.as_file(resources.files(CONFIG_MODULE) / "config.yaml") as path:
        value = OmegaConf.load(path).get("history_dir")
    return str(value) if value else None


def _write_new(folder: Path, stem: str, data: bytes) -> Path:
    """Write ``data`` to ``folder/stem.json`` atomically, or ``stem-2.json``, ... if that exists: never over
    another run (two runs of one suite can end in the same second)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{stem}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        for n in range(1, 1000):
            path = folder / (f"{stem}.json" if n == 1 else f"{stem}-{n}.json")
            try:
                os.link(tmp, path)  # fails if the name is taken; no window where the file is half-written
                return path
            except FileExistsError:
                continue
            except OSError:  # a filesystem without hard links: a rename onto a name that is free now
                if path.exists():
                    continue
                os.replace(tmp, path)
                return path
        raise FileExistsError(f"{folder / stem}.json and 998 numbered variants exist")
    finally:
        Path(tmp).unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def record(results_path, history_dir) -> Path:
    """Copy one run's results file into ``history_dir``; return the copy's path."""
    data = Path(results_path).read_bytes()
    meta = {k: v for k, v in json.loads(data).items() if k != "rows"}
    machine = meta.get("machine") or {}
    return _write_new(Path(history_dir) / machine_slug(machine) / _torch_dir(machine), run_name(meta), data)


def record_quietly(results_path, history_dir, echo=print) -> Path | None:
    """``record`` for the runner: nothing when ``history_dir`` is unset; a one-line warning (never an
    exception) when it cannot be written, so a history problem never costs the run."""
    if not history_dir:
        return None
    try:
        return record(results_path, history_dir)
    except (OSError, ValueError) as exc:
        echo(f"optbench: warning: the run was not recorded in history_dir {history_dir}: {exc}")
        return None


def results_files(paths) -> list[Path]:
    """Results files under ``paths``: a file itself, a run folder's ``results.json``, else every ``*.json``
    below a folder (a history). Sorted, each once."""
    out = []
    for path in map(Path, paths):
        if path.is_file():
            out.append(path)
        elif (path / "results.json").is_file():
            out.append(path / "results.json")
        elif path.is_dir():
            out += sorted(p for p in path.rglob("*.json") if not p.name.startswith("."))
    return list(dict.fromkeys(p.resolve() for p in out))


def _matches(value: str, wanted: str | None) -> bool:
    return wanted is None or wanted.lower() in str(value).lower()


def read_history(paths, machine: str | None = None, torch: str | None = None,
                 warn=lambda m: print(m, file=sys.stderr), keep=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, rows) from the results files under ``paths``, oldest run first.

    ``runs`` has one row per run (RUN_COLUMNS); ``rows`` every result row plus the run's EXTRA columns.
    ``machine`` and ``torch`` keep the runs whose machine slug / torch version contain them. A copy of a
    run met twice (its run folder and its history file) counts once; a JSON file below a folder that is not
    an optbench results file is skipped with a warning (one named directly raises ValueError). ``keep``, a
    function of one run's rows returning the rows to keep, bounds the memory a long history takes."""
    named = {Path(p).resolve() for p in paths if Path(p).is_file()}
    runs, frames, seen = [], [], set()
    for path in results_files(paths):
        try:
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest in seen:
                continue
            meta, rows = load_results(path)
        except (OSError, ValueError) as exc:
            if path in named:
                raise ValueError(str(exc)) from None
            warn(f"optbench: skipping {path}: {exc}")
            continue
        seen.add(digest)
        info = meta.get("machine") or {}
        slug, version = machine_slug(info), str(info.get("torch") or "")
        if not (_matches(slug, machine) and _matches(version, torch)):
            continue
        device = ", ".join(sorted(set(rows["device"]) - {""})) or _device(meta)
        runs.append({"run": run_name(meta), "created": str(meta.get("created") or ""),
                     "git_sha": info.get("git_sha") or "", "machine": slug, "torch": version,
                     "cpu": info.get("cpu") or "", "cpu_threads": info.get("cpu_threads"),
                     "gpu": info.get("gpu") or "", "suites": ", ".join(meta.get("suites") or []), "device": device,
                     "wall_s": meta.get("wall_s"), "path": str(path)})
        frames.append(rows if keep is None else keep(rows))
    order = sorted(range(len(runs)), key=lambda i: (_stamp(runs[i]["created"]), runs[i]["run"], runs[i]["path"]))
    runs, frames = [runs[i] for i in order], [frames[i] for i in order]
    taken: dict[str, int] = {}
    for i, r in enumerate(runs):  # run ids unique even for two runs that end in the same second
        taken[r["run"]] = n = taken.get(r["run"], 0) + 1
        r["run"] = r["run"] if n == 1 else f"{r['run']}-{n}"
        frames[i] = frames[i].assign(**{key: r[key] for key in EXTRA})
    table = pd.DataFrame(runs, columns=RUN_COLUMNS)
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*COLUMNS, *EXTRA])
    return table, rows


def load_history(paths, machine: str | None = None, torch: str | None = None) -> pd.DataFrame:
    """Every result row under ``paths`` plus the run's ``run``, ``created``, ``git_sha``, ``machine``, ``torch``."""
    return read_history(paths, machine, torch)[1]


def list_runs(paths, machine: str | None = None, torch: str | None = None) -> pd.DataFrame:
    """One row per run under ``paths`` (RUN_COLUMNS), oldest first."""
    return read_history(paths, machine, torch)[0]
