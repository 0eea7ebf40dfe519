"""What ``optbench list`` shows: suites, torch's optimizers, and which implementations run here."""

from __future__ import annotations

import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from optbench.kernels import torch_implementations
from optbench.kernels.torch_variants import optimizer_class
from optbench.suite import DTYPES, Suite


def suites() -> list[Suite]:
    from optbench.cli import CONFIG_MODULE, config_names

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        found = [Suite.from_config(compose(config_name="config", overrides=[f"suite={n}"]).suite) for n in config_names("suite")]
    GlobalHydra.instance().clear()
    return found


def describe() -> str:
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    lines = [f"torch {torch.__version__}; devices: {', '.join(d.type for d in devices)}", "", "suites:"]
    covered = set()
    for suite in suites():
        covered.add(suite.optimizer)
        lines.append(f"  {suite.name:<11} {suite.optimizer:<11} dtypes {','.join(suite.dtypes)}; "
                     f"hparams {','.join(h.name for h in suite.hparams)}")
        for device in devices:
            cells = []
            for impl in torch_implementations(optimizer_class(suite.optimizer)).values():
                ok = [d for d in suite.dtypes if impl.available(device, DTYPES[d]) is None]
                cells.append(f"{impl.name}({','.join(ok) if ok else 'unavailable'})")
            lines.append(f"    {device.type}: {' '.join(cells)}")
    others = sorted(n for n in dir(torch.optim) if isinstance(getattr(torch.optim, n), type)
                    and issubclass(getattr(torch.optim, n), torch.optim.Optimizer) and n != "Optimizer" and n not in covered)
    lines += ["", f"torch.optim optimizers without a suite yet: {', '.join(others)}",
              "", "test your own optimizer: optbench run suite=adamw candidate=my_pkg.optim.MyAdamW"]
    return "\n".join(lines)
