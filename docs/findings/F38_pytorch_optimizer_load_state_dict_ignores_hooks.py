"""F38: pytorch-optimizer's BaseOptimizer.load_state_dict re-pairs state by position after torch's load, ignoring
what a load_state_dict pre-hook returned.

torch.optim.Optimizer.register_load_state_dict_pre_hook lets a hook return the state_dict to load (a name-aware
loader, a checkpoint converter). pytorch-optimizer 4.1.0 overrides load_state_dict: it calls torch's (which runs the
hook and loads what the hook returned), then walks the ORIGINAL state_dict again, pairing each group's params with
the saved ids by position, and rebuilds each parameter's state from the positional entry. A hook that reorders
parameters (here: a model whose parameters come in the other order) makes it look up the wrong entry: KeyError
when the shapes of state differ, and for non-float tensor state (int counters) the positional entry's value is
silently taken. Exit 1 while loading through a reordering hook raises, 0 otherwise; 2 when pytorch-optimizer is not
installed.
"""
import sys

import torch

try:
    from pytorch_optimizer import Lion
except ImportError:
    print("cannot run: pytorch-optimizer is not installed", file=sys.stderr)
    sys.exit(2)


def reorder_by_name(optimizer, state_dict):
    """A pre-hook: re-key the saved state to this optimizer's order by param_names (what a name-aware loader does)."""
    saved = {n: i for g in state_dict["param_groups"] for n, i in zip(g["param_names"], g["params"])}
    state, groups, k = {}, [], 0
    for g, sg in zip(optimizer.param_groups, state_dict["param_groups"]):
        ids = []
        for name in g["param_names"]:
            if saved[name] in state_dict["state"]:
                state[k] = state_dict["state"][saved[name]]
            ids.append(k)
            k += 1
        groups.append({**sg, "params": ids, "param_names": list(g["param_names"])})
    return {"state": state, "param_groups": groups}


torch.manual_seed(0)
a, b = torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(2))
first = Lion([("a", a), ("b", b)], lr=1e-3)
b.grad = torch.ones(2)  # only b has stepped: a has no state yet
first.step()
saved = first.state_dict()

second = Lion([("b", b), ("a", a)], lr=1e-3)  # the same parameters, in the other order
second.register_load_state_dict_pre_hook(reorder_by_name)
try:
    second.load_state_dict(saved)
except KeyError as exc:
    print(f"load_state_dict through a reordering pre-hook raised KeyError: {exc} (documented: loads)")
    sys.exit("F38 present: pytorch-optimizer's load_state_dict ignores what a pre-hook returned")
print("loaded; b's exp_avg:", second.state[b].get("exp_avg"))
print("F38 absent")
