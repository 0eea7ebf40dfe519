"""``optbench report --dashboard``: read the runs under the paths given (``optbench.engine.history``) and write
their dashboard (``optbench.report.dashboard``)."""

from __future__ import annotations

from pathlib import Path

from optbench.engine.history import default_history_dir, read_history
from optbench.report import dashboard
from optbench.usage import EXIT_OK, UsageError


def read_and_write(paths, out_dir=dashboard.DEFAULT_OUT, machine: str | None = None, torch: str | None = None) -> Path:
    """Write ``out_dir/dashboard.html`` over the runs under ``paths``; UsageError when there are none."""
    try:
        runs, rows = read_history(paths, machine, torch, keep=dashboard.data.needed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if runs.empty:
        where = ", ".join(map(str, paths))
        wanted = "".join(f" {k}~{v!r}" for k, v in (("machine", machine), ("torch", torch)) if v)
        raise UsageError(f"no optbench runs{' matching' + wanted if wanted else ''} under {where}")
    return dashboard.write_dashboard(runs, rows, out_dir)


def dashboard_command(paths: list[Path], out: Path | None, screenshot: Path | None = None,
                      machine: str | None = None, torch: str | None = None) -> int:
    """``optbench report --dashboard [PATH ...] [--out DIR] [--screenshot PNG]``."""
    default = default_history_dir() if not paths else None
    if not paths and default is None:
        raise UsageError("no PATH given and history_dir is null in the config: pass history folders or results files")
    paths = paths or [Path(default)]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or directory: {missing[0]}"
                         + (" (the configured history_dir: no run has been recorded there yet)" if default else ""))
    if screenshot is not None:
        from optbench.report.screenshot import find_chromium

        if find_chromium() is None:
            raise UsageError("--screenshot needs Chromium (apt-get install chromium, or set OPTBENCH_CHROMIUM)")
    path = read_and_write(paths, out or dashboard.DEFAULT_OUT, machine, torch)
    print(f"dashboard: {path}")
    if screenshot is not None:
        from optbench.report.screenshot import ScreenshotError
        from optbench.report.screenshot import screenshot as shoot

        try:
            print(f"screenshot: {shoot(path, screenshot)}")
        except ScreenshotError as exc:
            raise UsageError(str(exc)) from None
    return EXIT_OK
