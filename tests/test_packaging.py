"""What a plain (non-editable) ``pip install .`` ships: every package of the tree, the suite files, the kernel
sources and the mutant catalogue, so ``optbench mutants`` and the suites work outside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def installed_name(folder: Path) -> str:
    for name, source in sorted(SETUPTOOLS["package-dir"].items(), key=lambda kv: -len(kv[1])):
        if folder == ROOT / source or (ROOT / source) in folder.parents:
            return ".".join([name, *folder.relative_to(ROOT / source).parts])
    raise AssertionError(f"{folder} is under no package-dir mapping")


def test_every_package_of_the_tree_is_listed():
    folders = [p.parent for top in ("optbench", "kernels", "reference", "suites")
               for p in (ROOT / top).rglob("__init__.py")]
    assert sorted(installed_name(f) for f in folders) == sorted(SETUPTOOLS["packages"])
    assert "optbench.mutants" in SETUPTOOLS["packages"]  # optbench mutants' default catalogue


def test_data_files_are_shipped():
    data = SETUPTOOLS["package-data"]
    assert set(data["optbench.suites"]) >= {"*.yaml", "suite/*.yaml", "device/*.yaml"}
    assert {"csrc/*.cpp", "csrc/*.h"} <= set(data["optbench.kernels"])
    assert list((ROOT / "kernels" / "csrc").glob("*.cpp")) and list((ROOT / "kernels" / "csrc").glob("*.h"))


def test_every_public_name_resolves():
    """What optbench exports for users and extension authors (``optbench.__all__``) is there, by name."""
    import optbench

    missing = [name for name in optbench.__all__ if getattr(optbench, name, None) is None]
    assert not missing, missing
    assert optbench.register_check.__module__ == "optbench.checks.registry"
    assert optbench.GradientReference.__module__ == "optbench.reference.contract"
