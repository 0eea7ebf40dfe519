"""The hyperparameter forms table: per optimizer and form, what each variant made of it.

Rows come from the forms check (``check == "forms"``). A cell joins the verdicts over the dtypes run:
``pass``, ``xfail`` (a declared deviation), ``FAIL``, ``rejected`` (torch refuses the form at
construction: an ``unsupported`` row with its message) or ``ERR`` (accepted, then crashed); a form
compared with its float twin adds ``=`` when every dtype was bit-exact, else its worst distance.
"""

from __future__ import annotations

import pandas as pd

from optbench.metrics import CASE_UNSUPPORTED, FORMS_VS_FLOAT_BITWISE, FORMS_VS_FLOAT_MAX_ERR_EPS, PARITY_MAX_ERR_EPS
from optbench.report.tables import num

SHOWN = {"pass": "pass", "xfail": "xfail", "xpass": "xpass", "fail": "FAIL", "unsupported": "rejected", "error": "ERR"}
WORST_FIRST = ("error", "fail", "xpass", "xfail", "unsupported", "pass")


def _cell(case: pd.DataFrame) -> str:
    verdicts = case[case.metric.isin([PARITY_MAX_ERR_EPS, CASE_UNSUPPORTED]) & (case.fqn == "")]
    statuses = set(verdicts.status)
    statuses |= set(case[case.metric == FORMS_VS_FLOAT_MAX_ERR_EPS].status) & {"fail"}
    if not statuses:
        return ""
    text = SHOWN.get(next(s for s in WORST_FIRST + tuple(statuses) if s in statuses), "?")
    twin = case[case.metric == FORMS_VS_FLOAT_BITWISE]
    if len(twin):
        if (twin.value == 1.0).all():
            text += " ="
        else:
            distance = case[case.metric == FORMS_VS_FLOAT_MAX_ERR_EPS].value.max()
            text += f" ({num(distance)} eps)"
    return text


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (optimizer, form), one column per implementation."""
    forms = rows[rows.check == "forms"]
    if forms.empty:
        return pd.DataFrame()
    impls = list(dict.fromkeys(forms.impl))
    cells = {key: _cell(case) for key, case in forms.groupby(["suite", "hparams", "impl"], sort=False)}
    keys = list(dict.fromkeys((s, h) for s, h, _ in cells))
    return pd.DataFrame([{"suite": s, "form": h, **{i: cells.get((s, h, i), "") for i in impls}} for s, h in keys])
