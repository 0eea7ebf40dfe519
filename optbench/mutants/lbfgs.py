"""LBFGS mutants: deliberately wrong L-BFGS optimizers optbench must catch, and a correct control.

The mutants share ``CorrectLBFGS``'s step: torch's ``LBFGS.step`` loop written out again (same ops, same
order, in the parameters' dtype), reusing torch's flat-vector helpers and strong Wolfe line search.
Each mutant overrides one small hook of that loop, so the rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.lbfgs import _strong_wolfe

from optbench.mutants.handwritten import scalar as _scalar


class CorrectLBFGS(torch.optim.LBFGS):
    """Control: a correct hand-written L-BFGS step (no bug)."""

    @torch.no_grad()
    def step(self, closure):  # type: ignore[override]
        closure = torch.enable_grad()(closure)
        group = self.param_groups[0]
        lr, max_iter, max_eval = _scalar(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        opt_cond = flat_grad.abs().max() <= tolerance_grad
        if opt_cond:
            return orig_loss

        d, t, H_diag = state.get("d"), state.get("t"), state.get("H_diag")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro, H_diag = [], [], [], 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if self._curvature_ok(ys):
                    if len(old_dirs) == history_size:
                        self._forget(old_dirs, old_stps, ro)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = self._h_diag(ys, y, H_diag)
                if "al" not in state:
                    state["al"] = [None] * history_size
                d = self._direction(flat_grad, old_dirs, old_stps, ro, H_diag, state["al"])

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone(memory_format=torch.contiguous_format)
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            t = self._first_step_size(flat_grad, lr) if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if group["line_search_fn"] is not None:
                if group["line_search_fn"] != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:  # no re-evaluation after the last iteration
                    with torch.enable_grad():
                        loss = closure()
                    loss = float(loss)
                    flat_grad = self._gather_flat_grad()
                    opt_cond = flat_grad.abs().max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _first_step_size(self, flat_grad: Tensor, lr: float):
        """The first iteration ever steps min(1, 1/|g|_1) * lr along -g."""
        return min(1.0, 1.0 / flat_grad.abs().sum()) * lr

    def _curvature_ok(self, ys: Tensor) -> bool:
        """A curvature pair (s, y) is kept only if y.s > 1e-10."""
        return bool(ys > 1e-10)

    def _forget(self, old_dirs: list, old_stps: list, ro: list) -> None:
        """History full: drop the oldest pair."""
        old_dirs.pop(0)
        old_stps.pop(0)
        ro.pop(0)

    def _h_diag(self, ys: Tensor, y: Tensor, H_diag):
        """Scale of the initial inverse Hessian: y.s / y.y of the newest pair."""
        return ys / y.dot(y)

    def _direction(self, flat_grad: Tensor, old_dirs: list, old_stps: list, ro: list, H_diag, al: list) -> Tensor:
        """The two-loop recursion: -H g, newest to oldest then oldest to newest."""
        num_old = len(old_dirs)
        q = flat_grad.neg()
        for i in range(num_old - 1, -1, -1):
            al[i] = old_stps[i].dot(q) * ro[i]
            q.add_(old_dirs[i], alpha=-al[i])
        d = r = torch.mul(q, H_diag)
        for i in self._second_loop_order(num_old):
            be_i = old_dirs[i].dot(r) * ro[i]
            r.add_(old_stps[i], alpha=al[i] - be_i)
        return d

    def _second_loop_order(self, num_old: int):
        return range(num_old)


class NoFirstStepScaleLBFGS(CorrectLBFGS):
    """Bug: the first iteration steps lr along -g, without the min(1, 1/|g|_1) scaling."""

    def _first_step_size(self, flat_grad: Tensor, lr: float):
        return lr


class StaleHDiagLBFGS(CorrectLBFGS):
    """Bug: the initial inverse Hessian H_diag stays 1 (never rescaled to y.s / y.y)."""

    def _h_diag(self, ys: Tensor, y: Tensor, H_diag):
        return H_diag


class SecondLoopReversedLBFGS(CorrectLBFGS):
    """Bug: the two-loop recursion's second loop runs newest to oldest, like the first."""

    def _second_loop_order(self, num_old: int):
        return range(num_old - 1, -1, -1)


class DropNewestLBFGS(CorrectLBFGS):
    """Bug: with the history full, the newest pair is dropped instead of the oldest."""

    def _forget(self, old_dirs: list, old_stps: list, ro: list) -> None:
        old_dirs.pop()
        old_stps.pop()
        ro.pop()


class NoCurvatureCheckLBFGS(CorrectLBFGS):
    """Bug: every curvature pair is kept, without the y.s > 1e-10 test."""

    def _curvature_ok(self, ys: Tensor) -> bool:
        return True


MUTANTS: dict[str, str] = {
    "NoFirstStepScaleLBFGS": "lbfgs",
    "StaleHDiagLBFGS": "lbfgs",
    "SecondLoopReversedLBFGS": "lbfgs",
    "DropNewestLBFGS": "lbfgs",
    "NoCurvatureCheckLBFGS": "lbfgs",
}
CONTROLS: dict[str, str] = {"CorrectLBFGS": "lbfgs"}
