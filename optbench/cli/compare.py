"""``optbench compare``: timing changes and newly failing verdicts between two runs."""

from __future__ import annotations

import sys
from pathlib import Path

from optbench.results import load_run
from optbench.usage import EXIT_CHECK_FAILED, EXIT_NOTHING_VERIFIED, EXIT_OK, Parser, UsageError


def compare_command(args: list[str]) -> int:
    parser = Parser(prog="optbench compare", description=(
        "Compare two runs (say main vs a branch): per timing case the ratio of median step times, its "
        "confidence interval and the Mann-Whitney U p-value on the timing rounds; a case is slower/faster only "
        "when p < alpha and the ratio is beyond 1 +- threshold. Also lists verdicts that newly fail. Exit 1 if "
        "any case is slower, any verdict newly fails, the new run is unfinished or lacks a case the baseline had; "
        "exit 3 (NOTHING COMPARED) if no timing case could be compared and the runs share no verdict, or (UNDECIDED) "
        "if a case changed within what one process per run cannot tell from a difference between processes."))
    parser.add_argument("baseline", type=Path, help="results.json, or the run directory holding it")
    parser.add_argument("new", type=Path, help="results.json, or the run directory holding it")
    parser.add_argument("--threshold", type=float, default=0.05, help="smallest change flagged (default 0.05: 5%%)")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level (default 0.01)")
    parser.add_argument("--confidence", type=float, default=0.95, help="of the ratio's interval (default 0.95)")
    parser.add_argument("--calibration", type=Path, default=None,
                        help="an A/A calibration (optbench calibrate): a case's threshold is then at least its A/A "
                             "spread on this machine")
    parser.add_argument("--times-alone", action="store_true",
                        help="compare each case on its own times, never through the baseline both runs timed with it "
                             "(the default where the runs share a torch: optbench.perf.anchored)")
    parser.add_argument("--out", type=Path, default=None, help="also write the comparison (Markdown) to this file")
    parser.add_argument("--trust-edited", action="store_true",
                        help="read a results.json whose content no longer matches its digest (edited after the run)")
    ns = parser.parse_args(args)
    if not ns.threshold > 0:
        raise UsageError(f"--threshold {ns.threshold}: need a number > 0 (0.05 is 5%)")
    for flag in ("alpha", "confidence"):
        if not 0 < getattr(ns, flag) < 1:
            raise UsageError(f"--{flag} {getattr(ns, flag)}: need a number between 0 and 1")
    from optbench.perf import compare
    from optbench.report.compare import render as render_comparison

    (base_meta, base), (new_meta, new) = load_run(ns.baseline, ns.trust_edited), load_run(ns.new, ns.trust_edited)
    if differ := compare.machine_differences(base_meta, new_meta):
        print(f"optbench: warning: the runs were measured on different machines ({differ}); their times are not "
              "like for like", file=sys.stderr)
    if differ := compare.timing_config_differences(base_meta, new_meta):
        print(f"optbench: warning: the runs timed different workloads ({differ}); same-named cases are not "
              "like for like", file=sys.stderr)
    calibrated = None
    if ns.calibration is not None:
        from optbench.perf import calibration

        try:
            data = calibration.read(ns.calibration)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if differ := compare.machine_differences({"machine": data.get("machine") or {}}, new_meta):
            print(f"optbench: warning: the calibration was measured on another machine ({differ})", file=sys.stderr)
        calibrated = calibration.thresholds(data)
    same_torch = (base_meta.get("machine") or {}).get("torch") == (new_meta.get("machine") or {}).get("torch")
    rule = compare.Rule(ns.threshold, ns.alpha, ns.confidence, calibrated, anchored=same_torch and not ns.times_alone)
    result = compare.compare(base, new, rule, new_meta.get("run"))
    text = render_comparison(result)
    print(text)
    if ns.out:
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(text + "\n", encoding="utf-8")
    if result.regressed:
        return EXIT_CHECK_FAILED
    return EXIT_NOTHING_VERIFIED if result.compared_nothing or result.unclear else EXIT_OK
