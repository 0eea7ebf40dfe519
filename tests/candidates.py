"""Candidates that misbehave as a user's optimizer might: optbench must never report them as passing."""

import torch

from optbench.mutants.lion import CorrectLion


class BrokenConstructorSGD(torch.optim.SGD):
    """Raises when built with anything."""

    def __init__(self, params, **kwargs):
        raise RuntimeError("this optimizer refuses to be built")


class BrokenStepSGD(torch.optim.SGD):
    """Builds, then raises on the first step."""

    def step(self, closure=None):
        raise RuntimeError("step exploded")


class NoMaximizeSGD(torch.optim.SGD):
    """A correct SGD whose constructor has no ``maximize`` (it always minimizes)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, foreach=None):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov, foreach=foreach)


class RejectsNesterovSGD(torch.optim.SGD):
    """A correct SGD that rejects nesterov in its own words (a NotImplementedError, not torch's ValueError)."""

    def __init__(self, params, nesterov=False, **kwargs):
        if nesterov:
            raise NotImplementedError("nesterov momentum is not implemented in this SGD")
        super().__init__(params, **kwargs)


class NeedsScaleSGD(torch.optim.SGD):
    """A correct SGD with a required extra constructor argument (``candidate_kwargs='{scale: 1.0}'``)."""

    def __init__(self, params, *, scale, **kwargs):
        if scale != 1.0:
            raise ValueError("scale must be 1.0")
        super().__init__(params, **kwargs)


class CachedLrSGD(torch.optim.SGD):
    """Bug: reads each group's lr once, at construction, so an lr scheduler has no effect."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **kwargs)
        self._lrs = [float(group["lr"]) for group in self.param_groups]

    @torch.no_grad()
    def step(self, closure=None):
        current = [group["lr"] for group in self.param_groups]
        for group, lr in zip(self.param_groups, self._lrs):
            group["lr"] = lr
        try:
            return super().step(closure)
        finally:
            for group, lr in zip(self.param_groups, current):
                group["lr"] = lr


class Float32StateAdamW(torch.optim.AdamW):
    """A correct AdamW that keeps its moments in float32 for bfloat16/float16 parameters and computes
    each update in float32, rounding the parameter once (mixed precision as people train it)."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                work = torch.promote_types(p.dtype, torch.float32)
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, dtype=work)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=work)
                    if group["amsgrad"]:
                        state["max_exp_avg_sq"] = torch.zeros_like(p, dtype=work)
                grad = p.grad.to(work) * (-1.0 if group["maximize"] else 1.0)
                state["step"] += 1
                t = float(state["step"])
                value = p.to(work).mul_(1 - lr * decay)
                state["exp_avg"].lerp_(grad, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                second = state["exp_avg_sq"]
                if group["amsgrad"]:
                    second = torch.maximum(state["max_exp_avg_sq"], second, out=state["max_exp_avg_sq"])
                denom = (second.sqrt() / (1 - beta2**t) ** 0.5).add_(eps)
                value.addcdiv_(state["exp_avg"], denom, value=-lr / (1 - beta1**t))
                p.copy_(value)


class ConjugateGradSGD(torch.optim.SGD):
    """Bug (complex parameters): steps along ``conj(grad)``, so every imaginary part climbs its loss."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and p.is_complex():
                    p.grad = p.grad.conj().resolve_conj()
        return super().step(closure)


class ComplexSquareAdam(torch.optim.Adam):
    """Bug (complex parameters): the second moment takes the complex square ``g * g`` (``modulus=True``:
    ``|g|**2``, as a "natural" complex Adam would) where torch's documented rule squares the real and
    imaginary parts apart. Default options only (no weight decay, amsgrad or maximize)."""

    modulus = False

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g, state = p.grad, self.state[p]
                if not state:
                    state.update(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                state["step"] += 1
                t = float(state["step"])
                square = g * g.conj() if self.modulus else g * g
                state["exp_avg"].lerp_(g, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).add_(square, alpha=1 - beta2)
                denom = (state["exp_avg_sq"].sqrt() / (1 - beta2**t) ** 0.5).add_(group["eps"])
                p.addcdiv_(state["exp_avg"], denom, value=-group["lr"] / (1 - beta1**t))


class ModulusSquareAdam(ComplexSquareAdam):
    """Bug (complex parameters): the second moment is ``|g|**2`` for both parts (see ComplexSquareAdam)."""

    modulus = True


class DifferentiableAdam(torch.optim.Adam):
    """A correct hand-written Adam step autograd can follow (``differentiable=True``): L2 weight decay and
    maximize, out-of-place moments, bias corrections as Python floats. The control of the two mutants below."""

    def step(self, closure=None):
        with torch.set_grad_enabled(self.defaults["differentiable"]):
            for group in self.param_groups:
                (beta1, beta2), eps, decay = group["betas"], group["eps"], group["weight_decay"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = -p.grad if group["maximize"] else p.grad
                    grad = grad + decay * p if decay else grad
                    state = self.state[p]
                    if not state:
                        state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                    state["step"] += 1
                    t = state["step"]
                    state["exp_avg"] = beta1 * state["exp_avg"] + (1 - beta1) * grad
                    state["exp_avg_sq"] = beta2 * state["exp_avg_sq"] + (1 - beta2) * grad * grad
                    denom = self._denominator(state["exp_avg_sq"].sqrt() / (1 - beta2**t) ** 0.5 + eps)
                    p.sub_(self._lr(group) / (1 - beta1**t) * state["exp_avg"] / denom)

    def _denominator(self, denom):
        return denom

    def _lr(self, group):
        return group["lr"]


class DetachedDenominatorAdam(DifferentiableAdam):
    """Bug (differentiable): the same values, but the denominator is detached, so d step / d grad is wrong."""

    def _denominator(self, denom):
        return denom.detach()


class ItemLrAdam(DifferentiableAdam):
    """Bug (differentiable): reads a Tensor lr with ``.item()``, so the derivative with respect to lr is zero."""

    def _lr(self, group):
        lr = group["lr"]
        return lr.item() if isinstance(lr, torch.Tensor) else lr


class _DiesOnThirdStep(torch.optim.SGD):
    """A correct SGD until its third step (in this process), where it ends its process as ``die`` says."""

    steps_taken = 0

    def step(self, closure=None):
        type(self).steps_taken += 1
        if type(self).steps_taken == 3:
            self.die()
        return super().step(closure)


class ExitsSGD(_DiesOnThirdStep):
    """Ends its process with exit code 0 (``os._exit``: no cleanup, no exception)."""

    def die(self):
        import os

        os._exit(0)


class ExitsOnEmptySGD(torch.optim.SGD):
    """A correct SGD that, like bitsandbytes on CUDA (F76), prints a C library's last words and ends its process
    (``os._exit``) when a parameter with a gradient has no elements; ``OPTBENCH_TEST_EXIT`` is the status (0: it
    steps them, fixed), ``OPTBENCH_TEST_EXIT_SAYS`` the words, ``OPTBENCH_TEST_EXIT_ALWAYS=1`` at every step."""

    def step(self, closure=None):
        import os
        import sys

        code = int(os.environ.get("OPTBENCH_TEST_EXIT", "1"))
        always = os.environ.get("OPTBENCH_TEST_EXIT_ALWAYS") == "1"  # hostile: the same end on any parameters
        if code and (always or any(p.grad is not None and p.numel() == 0
                                   for g in self.param_groups for p in g["params"])):
            says = os.environ.get("OPTBENCH_TEST_EXIT_SAYS", "Error invalid argument at line 7 in file fake_ops.cu")
            print(says, file=sys.stderr, flush=True)
            os._exit(code)
        return super().step(closure)


class SystemExitSGD(_DiesOnThirdStep):
    """Raises SystemExit(0), as ``sys.exit()`` would."""

    def die(self):
        raise SystemExit(0)


class SegfaultsSGD(_DiesOnThirdStep):
    """Reads address 0: SIGSEGV, after a last word on stderr."""

    def die(self):
        import ctypes
        import sys

        print("segfaulting now", file=sys.stderr, flush=True)
        ctypes.string_at(0)


class LoadSegfaultsSGD(torch.optim.SGD):
    """Segfaults loading a state_dict (a C extension's load gone wrong): in the round-trip's first load."""

    def load_state_dict(self, state_dict):
        import ctypes

        ctypes.string_at(0)


class SegfaultsOnReversedOrderSGD(torch.optim.SGD):
    """Segfaults loading a state_dict whose groups hold its own parameters in reverse order (a C extension that
    trusts the file's layout): torch's positional load in the round-trip's 'reversed' scenario, never a load by
    name (which puts the state in the optimizer's order first)."""

    def load_state_dict(self, state_dict):
        saved = [g.get("param_names", []) for g in state_dict["param_groups"]]
        if saved == [g.get("param_names", [])[::-1] for g in self.param_groups] and len(saved[0]) > 1:
            import ctypes

            ctypes.string_at(0)
        super().load_state_dict(state_dict)


class HangsSGD(_DiesOnThirdStep):
    """Sleeps for an hour."""

    def die(self):
        import time

        time.sleep(3600)


class NAdamLookalike(torch.optim.Optimizer):
    """torch's NAdam code in a class of its own, not a NAdam subclass: a from-scratch NAdam that carries torch's
    F07 (mu_product in float32: 1e8 eps off at float64). Torch's declaration of F07 must not cover it."""

    def __init__(self, params, **kwargs):
        super().__init__(params, torch.optim.NAdam([torch.zeros(1)], **kwargs).defaults)

    _init_group = torch.optim.NAdam._init_group
    step = torch.optim.NAdam.step


class NAdamSubclass(torch.optim.NAdam):
    """torch's NAdam by inheritance: torch's declared deviations cover it."""


class KwargsAdamW(torch.optim.AdamW):
    """Takes **kwargs but refuses any it does not know (as heavyball's constructors do)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, **kwargs):
        if kwargs:
            raise TypeError(f"unknown keyword arguments: {sorted(kwargs)}")
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


class ConsumingAdamW(torch.optim.AdamW):
    """Sets p.grad to None after stepping (heavyball's consume_grad=True default)."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None
        return loss


class BookkeepingSGD(torch.optim.SGD):
    """Keeps a private default and group key its state_dict drops, and a step count in each group (heavyball)."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, lr=lr)
        self.defaults["_private"] = 1
        for g in self.param_groups:
            g["_private"] = 1

    def step(self, closure=None):
        for g in self.param_groups:
            g["step_count"] = g.get("step_count", 0) + 1
        return super().step(closure)

    def state_dict(self):
        saved = super().state_dict()
        for g in saved["param_groups"]:
            for k in [k for k in g if k.startswith("_")]:
                del g[k]
        return saved


class ExtraTrafficAdamW(torch.optim.AdamW):
    """torch's AdamW plus, when OPTBENCH_EXTRA_TRAFFIC=f is set (say 0.15), f more memory traffic per step: each
    stepped parameter's first elements copied to a scratch buffer (a read and a write), as many as make f of the
    step's seven float streams (p read and written, g read, both moments read and written). The benchmark's
    injected slowdown (tests/benchmarks/test_cross_run.py); without the variable it is AdamW."""

    STREAMS = 7

    @torch.no_grad()
    def step(self, closure=None):
        import os

        loss = super().step(closure)
        extra = float(os.environ.get("OPTBENCH_EXTRA_TRAFFIC", "0") or 0)
        if extra > 0:
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None or p.numel() == 0:
                        continue
                    count = min(p.numel(), round(extra * self.STREAMS / 2 * p.numel()))
                    state = self.state[p]
                    if "scratch" not in state or state["scratch"].numel() != count:
                        state["scratch"] = torch.empty(count, dtype=p.dtype, device=p.device)
                    state["scratch"].copy_(p.reshape(-1)[:count])
        return loss


class LazyAdagrad(torch.optim.Optimizer):
    """Adagrad written from its documentation in a class of its own, creating state at a parameter's first gradient
    (as libraries do; torch's Adagrad creates it at construction): correct."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 maximize=False):
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay, "eps": eps,
                                  "initial_accumulator_value": initial_accumulator_value, "maximize": maximize})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["sum"] = torch.full_like(p, group["initial_accumulator_value"])
                grad = -p.grad if group["maximize"] else p.grad
                state["step"] += 1
                if group["weight_decay"]:
                    grad = grad.add(p, alpha=group["weight_decay"])
                clr = group["lr"] / (1 + (state["step"].item() - 1) * group["lr_decay"])
                state["sum"].addcmul_(grad, grad, value=1)
                p.addcdiv_(grad, state["sum"].sqrt().add_(group["eps"]), value=-clr)


class MomentumOnlySGD(torch.optim.Optimizer):
    """SGD with momentum written in a class of its own whose lr has no default and that implements no plain SGD
    (NotImplementedError on momentum 0, as bitsandbytes' SGD): correct where it runs."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        if momentum == 0:
            raise NotImplementedError("SGD without momentum is not supported")
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"invalid lr, momentum or weight_decay: {lr}, {momentum}, {weight_decay}")
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.add(p, alpha=group["weight_decay"]) if group["weight_decay"] else p.grad
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = grad.clone()
                else:
                    state["momentum_buffer"].mul_(group["momentum"]).add_(grad)
                p.add_(state["momentum_buffer"], alpha=-group["lr"])


class SwallowingSGD(torch.optim.Optimizer):
    """Plain SGD with L2 decay whose ``**kwargs`` takes whatever it does not know and ignores it (as
    pytorch-optimizer's classes do): it takes no momentum, though its signature would accept one."""

    def __init__(self, params, lr=1e-3, weight_decay=0.0, **kwargs):
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad.to_dense() + group["weight_decay"] * p, alpha=-group["lr"])


class PassingOnAdam(torch.optim.Adam):
    """Passes its ``**kwargs`` on to torch's Adam, which keeps every option it takes."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **kwargs)


class DenseOnlySGD(torch.optim.SGD):
    """Refuses sparse gradients at its step, by design (pytorch-optimizer's NoSparseGradientError)."""

    @torch.no_grad()
    def step(self, closure=None):
        if any(p.grad is not None and p.grad.is_sparse for g in self.param_groups for p in g["params"]):
            raise RuntimeError("DenseOnlySGD does not support sparse gradients")
        return super().step(closure)


class UncheckedShapeSGD(torch.optim.SGD):
    """A native step that trusts its state's shapes (DeepSpeed's CPU ops): state of another shape segfaults it, where
    torch's for-loop raises; a load by name never hands it such state."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                buf = self.state.get(p, {}).get("momentum_buffer")
                if buf is not None and buf.shape != p.shape:
                    import ctypes

                    ctypes.string_at(0)
        return super().step(closure)


_UNSET = object()  # a library's sentinel default (heavyball's, for options it fills in itself)


class SentinelDefaultLion(CorrectLion):
    """A correct Lion whose constructor has a default that is a bare ``object()``: its defaults cannot all be
    written as data, and none of them is one the reference reads."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, maximize=False, clipping=_UNSET):
        super().__init__(params, lr=lr, betas=betas, weight_decay=weight_decay, maximize=maximize)
