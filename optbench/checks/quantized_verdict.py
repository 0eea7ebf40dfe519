"""The quantized check's verdict rows from what it found per parameter (``Tally``): the parameters a declared
deviation names (``fqn``, ``size``, ``kind``: bitsandbytes' transposed parameters on CUDA, F77) judged apart under
it, the rest together under the declarations that name no parameter (a tensor glob: ``param`` or the moments)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from optbench.checks.deviations import declared_status
from optbench.metrics import QUANTIZED_ABSMAX_ERR_EPS, QUANTIZED_CODES_UNEXPLAINED, QUANTIZED_PARAM_ERR_EPS
from optbench.results import row

PARAM_EPS = 8.0  # the new parameter: two roundings of it and the update's float32 arithmetic, in its dtype's eps
ABSMAX_EPS = 2.0  # a block's new absmax, in float32 eps: the max of float32 moments
SIGN_ROUNDING = 4.0  # Lion's sign(c) where |c| is within this many float32 eps of its terms' magnitude: rounding's


@dataclass
class Tally:
    """What the check found over some parameters' steps: the worst new parameter and absmax (value, where), codes
    that differ from the reference's (and those no rounding explains, the first where), map entries that differ
    from the documented maps, and Lion's elements whose sign rounding decides (left out)."""

    param: tuple = (0.0, "")
    absmax: tuple = (0.0, "")
    differ: int = 0
    unexplained: int = 0
    codes: int = 0
    wrong_maps: int = 0
    decided: int = 0
    where_unexplained: str = ""

    def __add__(self, other: Tally) -> Tally:
        return Tally(max(self.param, other.param), max(self.absmax, other.absmax), self.differ + other.differ,
                     self.unexplained + other.unexplained, self.codes + other.codes,
                     self.wrong_maps + other.wrong_maps, self.decided + other.decided,
                     self.where_unexplained or other.where_unexplained)


def names_parameters(d) -> bool:
    """Whether a declaration selects parameters (then they are judged apart under it), not only tensors."""
    return d.fqn != "*" or d.size != "any" or d.kind != "*"


def verdict_rows(labels: dict, check: str, steps: int, tallies: dict, specs: dict, declared: list,
                 rounding: float, moments: tuple) -> list[dict]:
    """The verdict rows: per declaration that names parameters, those of ``tallies`` (name -> Tally) its ``specs``
    (name -> ParamSpec) match, under it; then every other parameter, under the declarations naming none."""
    apart = [d for d in declared if names_parameters(d)]
    groups: dict = {}
    for n, tally in tallies.items():
        d = next((d for d in apart if d.matches_spec(specs[n])), None)
        groups[d] = groups.get(d, Tally()) + tally
    rows = []
    if None in groups or not groups:
        rows += _rows(labels, check, steps, groups.get(None, Tally()), [d for d in declared if d not in apart],
                      rounding, moments, "")
    for d, tally in groups.items():
        if d is not None:
            which = d.fqn if d.fqn != "*" else f"kind {d.kind}" if d.kind != "*" else f"size {d.size}"
            rows += _rows(labels, check, steps, tally, [d], rounding, moments, which)
    return rows


def _rows(labels: dict, check: str, steps: int, t: Tally, declared: list, rounding: float, moments: tuple,
          which: str) -> list[dict]:
    rows = []
    for metric, value, ok, detail in (
            (QUANTIZED_PARAM_ERR_EPS, t.param[0], t.param[0] <= PARAM_EPS,
             f"the new parameter against the quantized step from its own state: max {t.param[0]:.3g} eps "
             f"({t.param[1]}; tolerance {PARAM_EPS:g})"
             + (f"; {t.decided:,} elements' sign decided by rounding (|c| within {SIGN_ROUNDING:g} float32 eps "
                "of its terms) left out" if t.decided else "")),
            (QUANTIZED_ABSMAX_ERR_EPS, t.absmax[0], t.absmax[0] <= ABSMAX_EPS,
             f"each block's new absmax: max {t.absmax[0]:.3g} float32 eps ({t.absmax[1]}; tolerance {ABSMAX_EPS:g})"),
            (QUANTIZED_CODES_UNEXPLAINED, float(t.unexplained + t.wrong_maps), t.unexplained == 0 and t.wrong_maps == 0,
             f"{t.differ:,} of {t.codes:,} new codes differ from the reference quantizer's, {t.unexplained:,} beyond "
             f"rounding ({rounding:.3g} of the block's range)" + (f"; {t.where_unexplained}" if t.unexplained else "")
             + f"; {t.wrong_maps} map entries differ from the documented maps")):
        # a declaration's tensor glob: the parameter row judges "param", the absmax and codes rows the moments
        judged = ("param",) if metric == QUANTIZED_PARAM_ERR_EPS else moments
        covering = next((d for d in declared if any(fnmatch.fnmatchcase(name, d.tensor) for name in judged)), None)
        if covering is not None and covering.max_err_eps is not None and value > covering.max_err_eps:
            covering, detail = None, (f"{detail}; beyond {covering.finding}'s declared bound of "
                                      f"{covering.max_err_eps:g} eps, so not the known deviation")
        status = declared_status("pass" if ok else "fail", covering)
        rows.append(row(labels, check=check, metric=metric, value=value, status=status, step=steps,
                        fqn=which, detail=(f"{which}: " if which else "") + detail,
                        finding=covering.finding if covering and status != "pass" else ""))
    return rows
