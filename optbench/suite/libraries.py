"""A library's own findings, declared once for its classes wherever they are judged (``suites/library/<name>.yaml``).

A departure that lives in a library's base class (pytorch-optimizer's ``maximize_gradient`` writing into the
caller's gradient, its ``load_state_dict`` re-pairing state by position) shows in every algorithm of the library.
Its declaration is one file: ``library:`` (the top-level module) and ``deviations:`` in a suite's deviation format,
each naming candidates of that library only (``impl: "candidate:<library>.*"`` or a class of it), so torch's
implementations and every other library are still judged plainly. Every suite adds them to its own.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from omegaconf import OmegaConf

from optbench.suite import keys
from optbench.suites import CONFIG_MODULE

FOLDER = "library"


@lru_cache(maxsize=1)
def library_deviations() -> tuple:
    """Every built-in library file's deviations, as the config mappings a suite's ``deviations:`` holds."""
    folder = resources.files(CONFIG_MODULE) / FOLDER
    out = []
    for entry in sorted((e for e in folder.iterdir() if e.name.endswith(".yaml")), key=lambda e: e.name):
        cfg = OmegaConf.create(entry.read_text())
        keys.check(cfg, frozenset({"library", "deviations"}), f"{FOLDER}/{entry.name}")
        library = str(cfg.get("library") or "")
        if not library:
            raise ValueError(f"{FOLDER}/{entry.name}: no library: (the top-level module its classes are in)")
        for d in cfg.get("deviations") or []:
            impl = str(d.get("impl", ""))
            if not impl.startswith(f"candidate:{library}."):
                raise ValueError(f"{FOLDER}/{entry.name}: {d.get('finding')}: impl {impl!r} must name candidates of "
                                 f"{library} (candidate:{library}.*): a library file declares its own findings only")
            out.append(d)
    return tuple(out)
