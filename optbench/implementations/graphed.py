"""The optimizer step captured in a CUDA graph and replayed, following torch's recipe.

torch's recipe (the CUDA graphs notes, "whole network capture"; its graphed-optimizer tests): run a
few steps eagerly on a side stream (warm-up; the optimizer creates its state there), capture
``step()`` once with ``torch.cuda.graph`` while every ``.grad`` is a static tensor, then for each
later step copy the new gradients into those tensors and replay the graph (the caller's ``.grad`` tensors are
put back after it: a step must not replace them). The optimizer is built
with ``capturable=True`` (step counters on the device), except SGD, whose step keeps nothing on the
host.

A graph bakes in what was true at capture: which parameters have a gradient, and every
hyperparameter held as a Python number or a CPU tensor. When either changes (a parameter without a
gradient this step, a float lr that a scheduler moved) the step is captured again for that
combination, never replayed stale; an lr held in a CUDA tensor (the recipe's way to schedule lr) is
read by the graph at replay. A parameter's first step runs eagerly: its state must exist before a
capture. The optimizer's ``state`` is its own throughout, so snapshots read it as for any variant.
"""

from __future__ import annotations

import torch

WARMUP_STEPS = 3  # eager steps before the first capture, as torch's graphed-optimizer tests do
MAX_GRAPHS = 8  # captured combinations kept at once (each holds a private memory pool)


def _baked(value):
    """A group entry as a captured graph sees it: a CUDA tensor is read at replay (its identity
    matters), anything else by value."""
    if isinstance(value, torch.Tensor):
        return ("cuda tensor", id(value)) if value.is_cuda else tuple(value.detach().reshape(-1).tolist())
    if isinstance(value, (list, tuple)):
        return tuple(_baked(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


class GraphedStep:
    """A callable stepping ``optimizer`` through CUDA graphs (see the module docstring)."""

    def __init__(self, optimizer: torch.optim.Optimizer, warmup: int = WARMUP_STEPS):
        self.optimizer, self.warmup = optimizer, warmup
        self.eager_steps = 0
        self.stepped: set[int] = set()  # ids of parameters stepped at least once (their state exists)
        self.static: dict[int, torch.Tensor] = {}  # parameter id -> the .grad tensor every graph reads
        self.graphs: dict[tuple, torch.cuda.CUDAGraph] = {}

    def _params(self) -> list[torch.Tensor]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def _key(self, params: list[torch.Tensor]) -> tuple:
        groups = tuple(tuple((k, _baked(v)) for k, v in sorted(g.items()) if k not in ("params", "param_names"))
                       for g in self.optimizer.param_groups)
        return tuple(p.grad is not None for p in params), groups

    def _eager(self, with_grad: list[torch.Tensor]) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.optimizer.step()
        torch.cuda.current_stream().wait_stream(side)
        self.eager_steps += 1
        self.stepped.update(id(p) for p in with_grad)

    def __call__(self, closure=None) -> None:
        if closure is not None:
            raise RuntimeError("a closure-driven step cannot be captured in a CUDA graph")
        params = self._params()
        with_grad = [p for p in params if p.grad is not None]
        new = any(id(p) not in self.stepped for p in with_grad)
        if self.eager_steps < self.warmup or new or not with_grad:  # (no gradient at all: nothing to capture)
            self._eager(with_grad)
            return None
        callers = [p.grad for p in with_grad]
        for p in with_grad:  # this step's gradients into the tensors the graphs read
            static = self.static.get(id(p))
            if static is None:
                static = self.static[id(p)] = torch.empty_like(p.grad)
            static.copy_(p.grad)
            p.grad = static
        try:
            self._replay(params)
        finally:  # the caller's gradient tensors back: a graph reads the static ones whatever .grad holds
            for p, grad in zip(with_grad, callers):
                p.grad = grad
        return None

    def _replay(self, params: list[torch.Tensor]) -> None:
        key = self._key(params)
        graph = self.graphs.get(key)
        if graph is None:
            if len(self.graphs) >= MAX_GRAPHS:
                self.graphs.clear()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):  # records the kernels; nothing runs until replay
                self.optimizer.step()
            self.graphs[key] = graph
        graph.replay()
