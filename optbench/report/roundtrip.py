"""The round-trip matrix: optimizer x scenario rows, one column per implementation, each cell the by-name
verdict beside what torch's own positional load_state_dict did (right, silently WRONG, raises, CRASHES its process)."""

from __future__ import annotations

import pandas as pd

from optbench.metrics import POSITIONAL_PREFIX

BY_NAME = {"pass": "pass", "fail": "FAIL", "error": "ERR", "xfail": "xfail", "xpass": "XPASS", "skip": "skip"}
TORCH = {0.0: "right", 1.0: "WRONG", 2.0: "raises", 3.0: "CRASHES"}


def table(rows: pd.DataFrame) -> pd.DataFrame:
    rt = rows[(rows["check"] == "roundtrip") & rows["metric"].str.startswith("roundtrip.")]
    if rt.empty:
        return pd.DataFrame()
    positional = rt["metric"].str.startswith(POSITIONAL_PREFIX)
    scenario = rt["metric"].str.replace(POSITIONAL_PREFIX, "", regex=False).str.replace("roundtrip.", "", regex=False)
    frame = rt.assign(scenario=scenario, kind=positional.map({True: "torch", False: "by_name"}))
    keys = ["suite", "dtype", "scenario", "impl"]  # the round-trip runs at each dtype of the run
    by_name = frame[frame["kind"] == "by_name"].set_index(keys)["status"].map(BY_NAME)
    torch_ = frame[frame["kind"] == "torch"].set_index(keys)["value"].map(TORCH)
    cell = by_name.to_frame("by_name").join(torch_.rename("torch"), how="left")
    cell["text"] = cell["by_name"] + cell["torch"].map(lambda t: f" · torch {t}" if isinstance(t, str) else "")
    wide = cell["text"].unstack("impl").fillna("")
    order = list(dict.fromkeys(frame["impl"]))
    wide = wide.reindex(columns=[c for c in order if c in wide.columns])
    suites, dtypes, scenarios = (list(dict.fromkeys(frame[k])) for k in ("suite", "dtype", "scenario"))
    wide = wide.reindex(pd.MultiIndex.from_tuples([(s, d, c) for s in suites for d in dtypes for c in scenarios
                                                   if (s, d, c) in wide.index]))
    wide.index.names = ["suite", "dtype", "scenario"]
    return wide.reset_index()


def silently_wrong(rows: pd.DataFrame) -> pd.DataFrame:
    """Per scenario: how many (optimizer, implementation) cases torch's positional load got silently wrong."""
    rt = rows[(rows["check"] == "roundtrip") & rows["metric"].str.startswith(POSITIONAL_PREFIX)]
    if rt.empty:
        return pd.DataFrame()
    rt = rt.assign(scenario=rt["metric"].str.replace(POSITIONAL_PREFIX, "", regex=False),
                   verdict=rt["value"].map(TORCH))
    counts = rt.groupby("scenario", sort=False)["verdict"].value_counts().unstack(fill_value=0)
    verdicts = ("right", "WRONG", "raises", "CRASHES")
    return counts.reindex(columns=[c for c in verdicts if c in counts.columns]).reset_index()
