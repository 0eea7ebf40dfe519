"""A check of the plugin's own: after one step from fresh state every parameter moved by exactly lr (or 0 where
its momentum is 0), the property Signum's users rely on. Registered on import (entry point optbench.checks)."""

import torch

from optbench import Case, Outcome, register_check, row


def _section(rows):
    sel = rows[rows["check"] == "step_size"]
    return [("Step size after one step (plugin check)", sel[["suite", "impl", "dtype", "status", "value", "detail"]])]


@register_check(config={"lr": 0.01}, counted="step_size", sections=_section)
class StepSizeCheck:
    name = "step_size"
    requires = ()

    def cases(self, suite, ctx):
        return [Case(suite, impl, dtype, suite.hparams[0], ctx.device)
                for impl in ctx.impls[suite.name] for dtype in ctx.dtypes[suite.name]]

    def group(self, case):
        return (case.suite.name, self.name)

    def run(self, case, ctx):
        lr = float(ctx.settings.step_size.lr)
        gen = torch.Generator().manual_seed(ctx.seed)
        p = torch.nn.Parameter(torch.randn(64, generator=gen, dtype=getattr(torch, case.dtype)))
        p.grad = torch.randn(64, generator=gen, dtype=p.dtype)
        before = p.detach().clone()
        case.impl.build([{"params": [("w", p)]}], {**case.hset.options, "lr": lr}).step()
        moved = (p.detach() - before).abs().to(torch.float64)
        err = float((moved - lr).abs().max() / lr)
        status = "pass" if err < 1e-2 else "fail"
        return Outcome([row(case.labels, check=self.name, metric="step_size.max_err", value=err, status=status,
                            detail=f"max |step| off lr by {err:.2g} of lr")],
                       f"  {status.upper():5} step_size {case.impl_name} {case.dtype}: {err:.2g} of lr")
