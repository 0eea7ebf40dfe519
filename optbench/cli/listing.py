"""What ``optbench list`` shows: suites, torch's optimizers, and which implementations run here."""

from __future__ import annotations

import torch
from omegaconf import OmegaConf

import optbench.plugins as plugins
from optbench.implementations import torch_implementations
from optbench.suite.catalog import candidate_suite_names, optimizer_suite_names, resolve, suite_files
from optbench.suite.spec import DTYPES, Suite
from optbench.usage import EXIT_OK, UsageError


def suites() -> list[Suite | str]:
    """Every single-optimizer suite, or for one that cannot be loaded (a plugin's, a broken file) a line saying why."""
    files, out = suite_files(), []
    for name in optimizer_suite_names():
        try:
            out.append(resolve(OmegaConf.create(files[name].read_text(encoding="utf-8")))[0])
        except (UsageError, ValueError, ImportError, AttributeError, LookupError) as exc:
            out.append(f"  {name:<11} cannot be loaded: {(str(exc).splitlines() or [''])[0]}")
    return out


def describe() -> str:
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    lines = [f"torch {torch.__version__}; devices: {', '.join(d.type for d in devices)}", "", "suites:"]
    covered = set()
    for suite in suites():
        if isinstance(suite, str):
            lines.append(suite)
            continue
        covered.add(suite.optimizer)
        if "." not in suite.optimizer and not hasattr(torch.optim, suite.optimizer):
            lines.append(f"  {suite.name:<11} {suite.optimizer:<11} not in this torch (torch.optim.{suite.optimizer} "
                         f"is missing from {torch.__version__}): suite={suite.name} does not run here, suite=all "
                         "leaves it out")
            continue
        findings = sorted({d.finding + (f" ({d.device} only)" if d.device != "*" else "") for d in suite.deviations})
        elsewhere = sorted({f"{d.finding} (torch{d.torch})" for d in suite.deviations_elsewhere})
        elsewhere += [f"hparam set {h.name} (torch{h.torch})" for h in suite.hparams_elsewhere]
        lines.append(f"  {suite.name:<11} {suite.optimizer:<11} dtypes {','.join(suite.dtypes)}; "
                     f"{len(suite.hparams)} hparam sets"
                     + (f"; declared findings {','.join(findings)}" if findings else "")
                     + (f"; not applied on this torch: {', '.join(elsewhere)}" if elsewhere else ""))
        for device in devices:
            cells = []
            for impl in torch_implementations(suite.optimizer_class()).values():
                ok = [d for d in suite.dtypes if impl.available(device, DTYPES[d]) is None]
                why = "needs CUDA" if impl.needs_cuda and device.type != "cuda" else "unavailable"
                cells.append(f"{impl.name}({','.join(ok) if ok else why})")
            lines.append(f"    {device.type}: {' '.join(cells)}")
        if suite.implementations:
            lines.append("    the suite's own: " + ", ".join(f"{n} ({c})" for n, c in suite.implementations.items()))
    candidate_only = candidate_suite_names()
    meta = [n for n in suite_files() if n not in optimizer_suite_names() and n not in candidate_only]
    others = sorted(n for n in dir(torch.optim) if isinstance(getattr(torch.optim, n), type)
                    and issubclass(getattr(torch.optim, n), torch.optim.Optimizer) and n != "Optimizer"
                    and n not in covered)
    lines += ["", f"meta-suites: {', '.join(meta)}"]
    if candidate_only:
        lines.append(f"candidate-only suites (optbench run suite=<name> candidate=...): {', '.join(candidate_only)}")
    if others:
        lines.append(f"torch.optim optimizers without a suite yet: {', '.join(others)}")
    lines += plugin_lines()
    lines += ["", "test your own optimizer: optbench run suite=adamw candidate=my_pkg.optim.MyAdamW"]
    return "\n".join(lines)


def plugin_lines() -> list[str]:
    """Every installed plugin (``optbench.plugins``) by group: where it came from, and why it did not load."""
    import optbench.checks  # noqa: F401  (loads the check plugins)

    found = [p for group in plugins.GROUPS for p in plugins.load(group)]
    if not found:
        return []
    return ["", "plugins:"] + [f"  {p.group:<20} {p.where}" + (f": did not load: {p.error}" if p.error else "")
                               for p in found]


def list_command(args: list[str]) -> int:
    if args:
        raise UsageError(f"'optbench list' takes no arguments, got {' '.join(args)}")
    print(describe())
    return EXIT_OK
