"""A run's settings: the composed config resolved once into read-only, validated blocks.

Checks, cases and the engine read ``RunContext.settings``, never the raw Hydra config: ``settings.speed.params``,
``settings.roundtrip.get("scenarios")``, ``settings.workload.width``. ``Settings.of`` checks each block against the
defaults its owner registered (a check's ``config``, ``optbench.checks.registry``): a key the owner does not
declare, or a value of another kind than a non-null default (a number, true/false, a name, a list, a mapping), is a
one-line ``UsageError`` naming the key, so a mistyped override stops the run before anything runs. A check's own
rules (ranges, names) stay in the check. Lists become tuples and mappings read-only ``Block``s: nothing downstream
can change what the rest of the run reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from omegaconf import DictConfig, ListConfig, OmegaConf

from optbench.suites import run_config
from optbench.usage import UsageError

RUN_BLOCKS = ("workload", "report")  # the run config's own blocks (suites/config.yaml), checked like a check's


class Block(Mapping):
    """One block of settings, read-only: items by key (``block["k"]``, ``block.get("k")``) or attribute
    (``block.k``: a key it lacks is an AttributeError naming the block)."""

    __slots__ = ("_path", "_items")

    def __init__(self, path: str, items: Mapping):
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_items", dict(items))

    def __getitem__(self, key: str):
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getattr__(self, key: str):
        try:
            return self._items[key]
        except KeyError:
            raise AttributeError(f"{self._path} has no setting {key!r}") from None

    def __setattr__(self, key, value):
        raise AttributeError(f"{self._path} is read-only: settings are resolved once, before the run")

    def __repr__(self) -> str:
        return f"Block({self._path!r}, {self._items!r})"

    def to_dict(self) -> dict:
        return {k: v.to_dict() if isinstance(v, Block) else list(v) if isinstance(v, tuple) else v
                for k, v in self._items.items()}


def frozen(path: str, value):
    """``value`` with its lists as tuples and its mappings as ``Block``s (all the way down)."""
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, Mapping):
        return Block(path, {str(k): frozen(f"{path}.{k}", v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(f"{path}[{i}]", v) for i, v in enumerate(value))
    return value


def _kind(value) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (str, list, tuple)):
        return "a name or a list"  # one word (all, first) or several: blocks take both
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def checked(path: str, value, default):
    """``value`` frozen, if it is of ``default``'s kind (any kind where the default is null; null anywhere; a
    single number, or a name other than ``all``, where the default is a list stands for a list of one)."""
    value = frozen(path, value)
    if value is None or default is None:
        return value
    if isinstance(default, (list, tuple)) and isinstance(value, (int, float, str)) and value != "all":
        value = (value,)
    if _kind(value) != _kind(default):
        raise UsageError(f"{path}={_shown(value)}: need {_kind(default)}, like the default {_shown(default)}")
    return value


def _shown(value) -> str:
    if isinstance(value, Block):
        value = value.to_dict()
    return str(list(value) if isinstance(value, tuple) else value)


def block(name: str, value, defaults: Mapping) -> Block:
    """The block ``name`` of the run config, each key one ``defaults`` declares and of its default's kind."""
    value = frozen(name, value if value is not None else {})
    if not isinstance(value, Mapping):
        raise UsageError(f"{name}={_shown(value)}: need a mapping of settings ({', '.join(defaults)})")
    unknown = [k for k in value if k not in defaults]
    if unknown:
        raise UsageError(f"{name}.{unknown[0]}: no such setting (known: {', '.join(defaults)})")
    return Block(name, {k: checked(f"{name}.{k}", value.get(k, default), default) for k, default in defaults.items()})


@dataclass(frozen=True)
class Settings:
    """Every block of the run's settings (each check's and the run's own), and the run-wide values the checks
    read: ``check_threads`` (torch threads for untimed checks; None: torch's default) and ``compile_checks``
    (the checks the compiled variant takes part in; None: all)."""

    blocks: Mapping[str, Block] = field(default_factory=dict)
    check_threads: int | None = 1
    compile_checks: tuple[str, ...] | None = None

    @classmethod
    def of(cls, cfg: DictConfig, check_blocks: Mapping[str, Mapping]) -> Settings:
        """``cfg`` resolved: one ``Block`` per entry of ``check_blocks`` (a check's name -> its registered
        defaults) and per ``RUN_BLOCKS`` (their defaults: config.yaml's); a one-line UsageError for what does not
        fit."""
        run = run_config()
        owners = {**{name: OmegaConf.to_container(run[name], resolve=True) for name in RUN_BLOCKS}, **check_blocks}
        blocks = {name: block(name, cfg.get(name), defaults) for name, defaults in owners.items()}
        threads = checked("check_threads", cfg.get("check_threads"), 1)
        compile_checks = checked("compile_checks", cfg.get("compile_checks"), ["parity"])
        return cls(blocks, threads, compile_checks)

    def __getattr__(self, name: str) -> Block:
        blocks = object.__getattribute__(self, "blocks")
        if name in blocks:
            return blocks[name]
        raise AttributeError(f"the run has no settings block {name!r} (blocks: {', '.join(blocks)})")
