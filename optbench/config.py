"""The run configuration: Hydra's config module, composing it once, and checking names before Hydra does.

Everything that composes a config (``optbench run``, sweeps, the mutant trials, the pytest gate) comes
here, so a bad override answers in one line (``UsageError``) wherever it is given.
"""

from __future__ import annotations

from importlib import resources

from omegaconf import DictConfig

from optbench.composed import compose_with
from optbench.suites import CONFIG_MODULE
from optbench.usage import UsageError, did_you_mean
from optbench.yaml_loader import install as install_yaml_loader

install_yaml_loader()  # every compose reads its YAML with libyaml's parser (the same values, 8x sooner)


def config_names(group: str, config_dirs=()) -> list[str]:
    """The config files of ``group`` (``suite`` includes ``--config-dir`` folders' suites)."""
    if group == "suite":
        from optbench.suite.catalog import suite_names

        return suite_names(config_dirs)
    folder = resources.files(CONFIG_MODULE) / group
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def expand_globs(overrides: list[str], config_dirs=()) -> dict[str, str]:
    """Glob sweeps over a config group (``+matrix=glob(*)``, ``suite=glob(ad*)``) as the explicit choice lists Hydra
    would expand them to: {override as given: as expanded}, so that every sweep is checked and numbered alike."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:
        return {}  # precheck says why, in one line
    out = {}
    for line, override in zip(overrides, parsed):
        if override.is_sweep_override() and isinstance(override.value(), Glob):
            group = override.get_key_element().lstrip("+~")
            try:
                names = override.value().filter(config_names(group, config_dirs))
            except (FileNotFoundError, NotADirectoryError):
                raise UsageError(f"{line}: there is no config group {group!r}") from None
            if not names:
                raise UsageError(f"{line}: no {group} config matches")
            out[line] = f"{override.get_key_element()}={','.join(names)}"
    return out


def precheck(overrides: list[str], config_dirs=()) -> None:
    """Reject unknown suite/device names (also in sweeps) before Hydra composes anything."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as exc:
        raise UsageError(f"cannot parse overrides: {str(exc).splitlines()[0]}") from None
    for override in parsed:
        group = override.get_key_element()
        if group in ("suite", "device"):
            values = (list(override.sweep_string_iterator()) if override.is_sweep_override()
                      else [override.get_value_element_as_str()])
            for value in values:
                known = config_names(group, config_dirs)
                if value not in known:
                    own = (" (a suite of your own: --config-dir DIR with DIR/suite/<name>.yaml; docs/candidates.md)"
                           if group == "suite" else "")
                    raise UsageError(f"unknown {group} '{value}': {did_you_mean(value, known)}{own}")
                if group == "suite":
                    from optbench.suite.catalog import check_suite_file

                    check_suite_file(value, config_dirs)


def search_dirs(config_dirs=()) -> list[str]:
    """The folders Hydra searches besides optbench's own: the plugins' suite files' (``optbench.plugins``), then
    the ``config_dirs``."""
    import optbench.plugins as plugins

    return [d for d in plugins.suite_dirs() if d not in config_dirs] + list(config_dirs)


def search_path(config_dirs=()) -> list[str]:
    """The ``hydra.searchpath=`` override for ``search_dirs`` ([] when there are none)."""
    return _searchpath_override(search_dirs(config_dirs))


def _searchpath_override(dirs: list[str]) -> list[str]:
    return [f"hydra.searchpath=[{','.join('file://' + d for d in dirs)}]"] if dirs else []


def compose_config(overrides: list[str], config_dirs=()) -> DictConfig:
    """Compose with Hydra's compose API (the group choices once per process: ``optbench.composed``) so a bad
    override is one line, not Hydra's error page."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    import optbench.checks  # noqa: F401  (the checks' config blocks: optbench.checks.registry)

    dirs = search_dirs(config_dirs)
    searchpath = _searchpath_override(dirs)

    def plain(lines: list[str]) -> DictConfig:
        GlobalHydra.instance().clear()
        try:
            with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
                return compose(config_name="config", overrides=[*searchpath, *lines])
        finally:
            GlobalHydra.instance().clear()

    try:
        return compose_with(plain, list(overrides), dirs)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0]
        if first.startswith("Ambiguous value for argument"):  # key=a,b: Hydra reads a sweep, which needs -m
            key, _, value = first.split("'")[1].partition("=")
            raise UsageError(f"{key}={value}: a list needs brackets: {key}=[{value}] (a comma-separated value "
                             "without brackets is a sweep, which needs -m)") from None
        raise UsageError(first) from None
