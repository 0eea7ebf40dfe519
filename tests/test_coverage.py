"""Option coverage at least PyTorch's own: every option set and error input torch's tests use."""

import pytest

pytest.importorskip("expecttest")  # torch.testing._internal needs it (the test extra installs it)

from optbench.cli.coverage import error_input_coverage, option_set_coverage


def test_every_torch_option_set_is_an_optbench_hparam_set():
    rows = option_set_coverage()
    assert len(rows) >= 91  # torch 2.13 lists 91 on CPU
    missing = [(r["optimizer"], r["desc"]) for r in rows if not r["covered_by"]]
    assert not missing, missing


def test_every_torch_error_input_is_an_optbench_error_input():
    rows = error_input_coverage()
    assert len(rows) >= 118
    missing = [(r["optimizer"], r["desc"]) for r in rows if not r["covered_by"]]
    assert not missing, missing
