"""What torch's own positional ``load_state_dict`` does with a round-trip scenario: right, silently wrong,
or raises (at the load or the next step), judged against the by-name load of the same file."""

from __future__ import annotations

import torch

from optbench.hyperparameters import IMPLEMENTATION_FLAGS, constructor_defaults
from optbench.rows import first_words
from optbench.state.batched import per_parameter_state
from optbench.state.by_name import shape_mismatch
from optbench.state.formats import same_value
from optbench.state.scenarios import Scenario

POSITIONAL = {"right": 0.0, "silently wrong": 1.0, "raises": 2.0, "crashes": 3.0}  # crashes: killed its process


def _per_name(optimizer, params: dict) -> dict[str, tuple[dict, dict]]:
    """FQN -> (its state, its group's hyperparameters), by tensor identity."""
    ids = {id(p): n for n, p in params.items()}
    out, states = {}, per_parameter_state(optimizer)
    for group in optimizer.param_groups:
        hparams = {k: v for k, v in group.items() if k not in ("params", "param_names")}
        for p in group["params"]:
            out[ids[id(p)]] = (states.get(p, {}), hparams)
    return out


def _whose(state: dict, theirs: dict[str, tuple[dict, dict]]) -> str:
    """Whose state an FQN holds after a wrong load: another FQN's (by value), a fresh one, or neither."""
    if not state:
        return "no state: it starts fresh"
    for name, (other, _) in theirs.items():
        if other and other.keys() == state.keys() and all(same_value(state[k], other[k]) for k in state):
            return f"got {name}'s state"
    return "state"


def _probe(session, stepper, params: dict) -> None:
    """One plain step after a load (gradients of step ``save_at``; zeros for a grown matrix)."""
    optimizer = stepper.optimizer
    if session.closure:
        def closure():
            optimizer.zero_grad(set_to_none=True)
            loss = sum((p.float() ** 2).sum() for p in params.values())
            loss.backward()
            return loss
        optimizer.step(closure)
        return
    for n, p in params.items():
        spec = next(s for s in session.workload.specs if s.name == n)
        if tuple(p.shape) == tuple(spec.shape):
            p.grad = session.workload.gradient(session.save_at, n, p)
        else:
            p.grad = (torch.zeros_like(p).to_sparse() if isinstance(optimizer, torch.optim.SparseAdam)
                      else torch.zeros_like(p))
    optimizer.step()


def positional(session, scenario: Scenario, impl, state_dict: dict, params: dict, reference) -> tuple[str, str]:
    """What torch's own load_state_dict does here: right, silently wrong, or raises (at load or the next step)."""
    stepper = session.build(impl, scenario.load, params)
    names_before = [g.get("param_names") for g in stepper.optimizer.param_groups]
    try:
        stepper.optimizer.load_state_dict(state_dict)
    except Exception as exc:
        return "raises", f"load_state_dict raised {type(exc).__name__}: {first_words(str(exc))[:160]}"
    wrong, reset = [], set()
    defaults = constructor_defaults(type(stepper.optimizer))

    def absent_as_default(k, hparams, ref_hparams) -> bool:
        """A flag the saved group lacks and torch did not fill in (LBFGS's maximize, new in 2.14, has no
        __setstate__ default) reads as its constructor default where the by-name load has that value: the probe
        step below raises if the optimizer indexes it instead."""
        return k not in hparams and k in defaults and same_value(ref_hparams.get(k), defaults[k])

    if reference is not None:
        theirs, mine = _per_name(*reference), _per_name(stepper.optimizer, params)
        for n, (state, hparams) in mine.items():
            ref_state, ref_hparams = theirs[n]
            if state.keys() != ref_state.keys() or not all(same_value(state[k], ref_state[k]) for k in state):
                wrong.append(f"{n} ({_whose(state, theirs)})")
            elif (hparams.keys() != ref_hparams.keys()
                  or not all(same_value(hparams[k], ref_hparams[k]) for k in hparams)):
                bad = sorted(k for k in hparams.keys() | ref_hparams.keys()
                             if not same_value(hparams.get(k), ref_hparams.get(k))
                             and not absent_as_default(k, hparams, ref_hparams))
                if set(bad) <= set(IMPLEMENTATION_FLAGS):  # which kernel runs, not what it computes
                    reset.update(f"{k}={hparams.get(k)!r}" for k in bad)
                else:
                    wrong.append(f"{n} ({', '.join(bad)})")
    misfits = [n for n, (state, _) in _per_name(stepper.optimizer, params).items() if shape_mismatch(state, params[n])]
    if misfits and stepper.optimizer.defaults.get("fused"):
        return "silently wrong", (f"loaded state of another shape into {len(misfits)} FQNs (e.g. {misfits[0]}); not "
                                  "stepped: the fused CPU step does not check shapes and corrupts memory (finding F31)")
    if misfits and impl.is_candidate:  # a native step that checks no shapes corrupts this worker's heap, and a later
        # scenario of the case, in the same process, would fail (or not) for it: never stepped on such state
        return "silently wrong", (f"loaded state of another shape into {len(misfits)} FQNs (e.g. {misfits[0]}); not "
                                  "stepped: a candidate's step on it may corrupt this process's memory")
    try:
        _probe(session, stepper, params)
    except Exception as exc:
        return "raises", f"loaded, then step raised {type(exc).__name__}: {first_words(str(exc))[:160]}"
    if reference is None:
        return "silently wrong", "loaded and stepped although the state cannot belong to these parameters"
    if wrong:
        return "silently wrong", (f"{len(wrong)} of {len(params)} FQNs got another's state or hparams, "
                                  f"e.g. {'; '.join(wrong[:2])}")
    relabelled = [g.get("param_names") for g in stepper.optimizer.param_groups] != names_before
    return "right", ("state and hparams right" + ("; param_names overwritten by the saved names" if relabelled else "")
                     + (f"; implementation flags reset to torch's defaults: {', '.join(sorted(reset))}"
                        if reset else ""))
