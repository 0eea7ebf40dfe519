"""The parity matrix: optimizer x hparam set (rows) by implementation x dtype (columns).

Each cell is one parity case: its worst gated error in eps, coloured by its ratio to the tolerance
(green well inside, red past it), marked when it failed (FAIL), raised (ERR), carries a declared
deviation (xfail / xpass), did not take the hparam set (n/a) or cannot run here (skip).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from optbench.implementations.torch_variants import TORCH_VARIANTS
from optbench.metrics import PARITY_MAX_ERR_EPS, PARITY_TOL_EPS
from optbench.report.plots import pyplot, save
from optbench.report.tables import escape, num
from optbench.results import DECLARED, FAILING, NO_VERDICT
from optbench.suite.spec import DTYPES

IMPL_ORDER = TORCH_VARIANTS  # torch's variants first, in their order; the rest after
DTYPE_ORDER = tuple(DTYPES)
MARK = {"fail": "FAIL", "error": "ERR", "xfail": "xfail", "xpass": "XPASS", "unsupported": "n/a", "skip": "skip"}


def cells(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per parity case: suite, hparams, impl, dtype, value, tol, status."""
    parity = rows[rows["check"] == "parity"]
    verdicts = parity[(parity["metric"] == PARITY_MAX_ERR_EPS) & (parity["fqn"] == "")]
    tol = parity[parity["metric"] == PARITY_TOL_EPS].set_index(["suite", "hparams", "impl", "dtype"])["value"]
    tol = tol[~tol.index.duplicated()]  # a merged sweep repeats a case in each job that ran it: the first, as below
    out = verdicts[["suite", "hparams", "impl", "dtype", "value", "status"]].copy()
    out["tol"] = [tol.get(k, np.nan) for k in zip(out["suite"], out["hparams"], out["impl"], out["dtype"])]
    others = parity[parity["status"].isin(["error", "unsupported"]) & (parity["hparams"] != "")]
    others = others[["suite", "hparams", "impl", "dtype", "status"]].assign(value=np.nan, tol=np.nan)
    both = pd.concat([out, others], ignore_index=True)
    return both.drop_duplicates(["suite", "hparams", "impl", "dtype"], keep="first")


def _column_order(frame: pd.DataFrame) -> list[tuple[str, str]]:
    def rank(impl: str) -> tuple:  # a +master32 variant right after its own
        base = impl.partition("+")[0]
        return IMPL_ORDER.index(base) if base in IMPL_ORDER else -1, impl

    impls = sorted(frame["impl"].unique(), key=rank)
    dtypes = sorted(frame["dtype"].unique(), key=lambda d: DTYPE_ORDER.index(d) if d in DTYPE_ORDER else 9)
    present = set(zip(frame["dtype"], frame["impl"]))
    return [(d, i) for d in dtypes for i in impls if (d, i) in present]


def _text(cell) -> str:
    if cell is None:
        return ""
    mark = MARK.get(cell.status, "")
    value = num(cell.value) if np.isfinite(cell.value) or np.isinf(cell.value) else ""
    return " ".join(p for p in (mark, value) if p)


def markdown(frame: pd.DataFrame) -> str:
    """The matrix of ``frame`` (``cells``) as a Markdown table."""
    if frame.empty:
        return "_no parity cases_"
    columns = _column_order(frame)
    index = frame.set_index(["suite", "hparams", "dtype", "impl"])
    lines = ["| suite | hparams | " + " | ".join(escape(f"{i} {d}") for d, i in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for (suite, hparams), _ in frame.groupby(["suite", "hparams"], sort=False):
        texts = []
        for d, i in columns:
            key = (suite, hparams, d, i)
            cell = index.loc[key] if key in index.index else None
            text = _text(cell) if cell is not None else ""
            texts.append(f"**{text}**" if cell is not None and cell.status in FAILING else text)
        lines.append(f"| {escape(suite)} | {escape(hparams)} | " + " | ".join(texts) + " |")
    return "\n".join(lines)


def heatmap(frame: pd.DataFrame, path: Path) -> bool:
    """The matrix of ``frame`` (``cells``) as a PNG heatmap of log10(error / tolerance), annotated with each cell's
    error."""
    if frame.empty:
        path.unlink(missing_ok=True)
        return False
    columns = _column_order(frame)
    row_keys = list(dict.fromkeys(zip(frame["suite"], frame["hparams"])))
    ratio = np.full((len(row_keys), len(columns)), np.nan)
    texts = [["" for _ in columns] for _ in row_keys]
    gray = np.zeros_like(ratio)
    declared = np.zeros_like(ratio)  # xfail: a declared deviation; drawn apart, never as "good"
    index = frame.set_index(["suite", "hparams", "dtype", "impl"])
    for r, (suite, hparams) in enumerate(row_keys):
        for c, (d, i) in enumerate(columns):
            key = (suite, hparams, d, i)
            if key not in index.index:
                continue
            cell = index.loc[key]
            texts[r][c] = _text(cell)
            if cell.status in NO_VERDICT | {"error"}:
                gray[r, c] = 1
            elif cell.status in DECLARED:
                declared[r, c] = 1
            elif np.isfinite(cell.tol) and cell.tol > 0:
                value = cell.value if np.isfinite(cell.value) else 1e300
                ratio[r, c] = np.log10(max(value, 1e-300) / cell.tol)
    height = max(3.0, 0.28 * len(row_keys) + 2.0)
    width = max(6.0, 0.95 * len(columns) + 4.5)
    fig, ax = pyplot().subplots(figsize=(width, height))
    shown = np.clip(ratio, -3, 3)
    image = ax.imshow(np.ma.masked_invalid(shown), cmap="RdYlGn_r", vmin=-3, vmax=3, aspect="auto")
    ax.imshow(np.ma.masked_where(gray == 0, gray), cmap="Greys", vmin=0, vmax=4, aspect="auto")
    ax.imshow(np.ma.masked_where(declared == 0, declared), cmap="Purples", vmin=0, vmax=2.5, aspect="auto")
    small = len(row_keys) * len(columns) <= 900
    for r in range(len(row_keys)):
        for c in range(len(columns)):
            if texts[r][c] and small:
                bold = texts[r][c].startswith(("FAIL", "ERR"))
                ax.text(c, r, texts[r][c], ha="center", va="center", fontsize=6,
                        fontweight="bold" if bold else "normal")
    ax.set_xticks(range(len(columns)), [f"{i}\n{d}" for d, i in columns], fontsize=7)
    ax.set_yticks(range(len(row_keys)), [f"{s} / {h}" for s, h in row_keys], fontsize=7)
    ax.xaxis.tick_top()
    bar = fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    bar.set_label("log10(max error / tolerance): > 0 fails unless declared", fontsize=7)
    ax.set_title("Parity matrix: worst error in eps per case (purple: declared upstream deviation, xfail; "
                 "gray: not taken or not run here)", fontsize=8, pad=28)
    return save(fig, path)
