"""HTML pieces of the dashboard: its stylesheet, escaping, tables with per-cell classes and tooltips, and
collapsible sections. Everything inline: the page loads nothing else."""

from __future__ import annotations

import html

import pandas as pd

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;\
max-width:1240px;padding:0 16px;color:#1d2329}
h1{font-size:24px;margin:0 0 8px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #d5dbe1;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}summary{cursor:pointer;font-weight:600;margin:8px 0}
table{border-collapse:collapse;margin:6px 0 14px;font-size:12.5px}\
th,td{border:1px solid #d5dbe1;padding:3px 7px;text-align:left}
th{background:#f1f4f7}td.n{text-align:right;font-variant-numeric:tabular-nums}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:8px 0}\
.facts dt{font-weight:600}.facts dd{margin:0}
.none{color:#68727c;font-style:italic}.note{color:#4a545e;font-size:12.5px;margin:4px 0}
svg.chart{max-width:100%;height:auto;display:block;margin:4px 0}
.v-pass{background:#cdebd3}.v-fail,.v-error{background:#f3b5b5;font-weight:700}.v-xfail{background:#ddd3f0}
.v-xpass{background:#fbd9a8}.v-unsupported{background:#e4e6e8;color:#555}.v-skip{background:#f3f4f5;color:#888}
.slower{color:#b3261e;font-weight:600}.faster{color:#1b7f3b;font-weight:600}
.bar{display:inline-block;height:9px;background:#5b8fd6;margin-right:6px;vertical-align:middle}
.scroll{overflow-x:auto}th,td[class^="v-"],.nw{white-space:nowrap}
"""


def e(value) -> str:
    return html.escape(str(value), quote=True)


def table(frame: pd.DataFrame, numeric=(), classes=None, titles=None, raw=()) -> str:
    """An HTML table of ``frame``'s (already formatted) cells; ``classes``/``titles``: frames of the same
    shape giving each cell's class and tooltip; ``raw``: columns holding HTML already."""
    head = "".join(f"<th>{e(c)}</th>" for c in frame.columns)
    body = []
    for i in range(len(frame)):
        cells = []
        for j, column in enumerate(frame.columns):
            cls = " ".join(filter(None, ["n" if column in numeric else "",
                                         classes.iat[i, j] if classes is not None else ""]))
            tip = titles.iat[i, j] if titles is not None else ""
            value = frame.iat[i, j]
            attrs = (f' class="{e(cls)}"' if cls else "") + (f' title="{e(tip)}"' if tip else "")
            cells.append(f"<td{attrs}>{value if column in raw else e(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def none(text: str) -> str:
    return f'<p class="none">{e(text)}</p>'


def details(title: str, body: str, is_open: bool) -> str:
    return f"<details{' open' if is_open else ''}><summary>{e(title)}</summary>{body}</details>"
