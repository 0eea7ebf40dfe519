"""Metric names: the ``metric`` column of result rows, one constant each, so code never spells one twice.

Round-trip metrics are named per scenario: ``roundtrip_metric(name)`` and ``positional_metric(name)``.
"""

from __future__ import annotations

CASE_ERROR = "case.error"  # the case raised: an error row (detail: the exception)
CASE_SKIP = "case.skip"  # the case cannot run here (device, dtype, size)
CASE_SKIPPED = "case.skipped"  # the case was not run (detail: why)
CASE_UNSUPPORTED = "case.unsupported"  # the implementation does not take this hparam set

RUN_CASE_S = "run.case_s"  # wall seconds a case took

SWEEP_JOB = "sweep.job"  # a sweep job whose results are not whole (value: its exit code)

# largest error over the trajectory, in eps of the dtype (per case, and per FQN/tensor)
PARITY_MAX_ERR_EPS = "parity.max_err_eps"
PARITY_TOL_EPS = "parity.tol_eps"  # the trajectory's tolerance, in eps
# largest one-step error (each step from the implementation's own state)
PARITY_ONE_STEP_MAX_ERR_EPS = "parity.one_step_max_err_eps"
PARITY_ONE_STEP_DECISIONS_LEFT_OUT = "parity.one_step_decisions_left_out"  # element-steps decided by rounding
PARITY_QUANTIZED_UNJUDGED = "parity.quantized_unjudged"  # parameters of quantized state the run's checks leave out
PARITY_DECISIONS_ADOPTED = "parity.decisions_adopted"  # trajectory element-steps taking the impl's outcome
PARITY_STEP_MAX_ERR_EPS = "parity.step_max_err_eps"  # largest error at each step
PARITY_CALLER_CONTRACT = "parity.caller_contract"  # a step changed the caller's gradient or a parameter's kind
# cross: largest difference from torch's for-loop, in eps
PARITY_XMAX_ERR_EPS_VS_FORLOOP = "parity.xmax_err_eps_vs_forloop"

STATE_DTYPE = "state.dtype"  # bits of the dtype a state tensor is kept in

QUANTIZED_PARAM_ERR_EPS = "quantized.param_max_err_eps"  # a quantized step's new parameter against the reference's
QUANTIZED_ABSMAX_ERR_EPS = "quantized.absmax_max_err_eps"  # a block's new absmax, in float32 eps
QUANTIZED_CODES_UNEXPLAINED = "quantized.codes_unexplained"  # new codes no rounding explains, and map entries off
QUANTIZED_PRICE = "quantized.price"  # free-running parameters' distance from the full-precision reference, per update
QUANTIZED_PRICE_STEP = "quantized.price_step"  # the price after each step (the plot of the price per step)
QUANTIZED_RAISES = "quantized.raises"  # a quantized case a declared deviation says raises: whether it still does
QUANTIZED_SPREAD = "quantized.spread"  # ... from the quantized reference run on its own codes
STOCHASTIC_BIAS_Z = "stochastic.bias_z"  # many draws of one step: the overall excess of away-from-zero roundings (sd)
STOCHASTIC_ELEMENTS = "stochastic.elements_failing"  # elements whose away count is not Binomial(draws, p)
STOCHASTIC_STRAYS = "stochastic.not_neighbours"  # draws that are neither bfloat16 neighbour of the reference's value

DEVIATION_MAX_ERR_EPS = "deviation.max_err_eps"  # a declared deviation's observed size, in eps
DEVIATION_OBSERVED = "deviation.observed"  # a declared raise or exit: 1 if it did, 0 if not; differentiable: its size

DIFFERENTIABLE_MAX_REL_ERR = "differentiable.max_rel_err"  # largest relative error of a derivative through the step

ERRORS_REJECTED = "errors.rejected"  # an error input was rejected as documented

# a hyperparameter form (Tensor lr, ...) is bit-identical to its float twin
FORMS_VS_FLOAT_BITWISE = "forms.vs_float_bitwise"
# a hyperparameter form's largest difference from its float twin, in eps
FORMS_VS_FLOAT_MAX_ERR_EPS = "forms.vs_float_max_err_eps"

RESHARD_MAX_ERR_EPS = "reshard.max_err_eps"  # largest error after a resharded save and load, in eps

MEM_STATE_BYTES = "mem.state_bytes"  # bytes of optimizer state (per case, and per FQN)
MEM_STATE_BYTES_PER_PARAM = "mem.state_bytes_per_param"  # bytes of optimizer state per parameter element
MEM_PEAK_TRANSIENT_BYTES = "mem.peak_transient_bytes"  # peak memory a step allocates beyond its state
MEM_PEAK_TRANSIENT_BYTES_PER_PARAM = "mem.peak_transient_bytes_per_param"  # peak transient bytes per parameter element

TIME_STEP_MS = "time.step_ms"  # median step time
TIME_STEP_MS_IQR = "time.step_ms_iqr"  # interquartile range of the step time
TIME_STEP_MS_CV = "time.step_ms_cv"  # coefficient of variation of the step time
TIME_STALLED_ROUNDS = "time.stalled_rounds"  # rounds past Tukey's far-out fence, set aside (optbench.perf.noise)
TIME_ROUNDS = "time.rounds"  # timing rounds measured
TIME_STEPS_PER_ROUND = "time.steps_per_round"  # steps per timing round
TIME_ROUND_MS = "time.round_ms"  # one round's mean step time (step: the round's index)
TIME_REPEAT_MS = "time.repeat_ms"  # one process-level repeat's median step time (step: the repeat's index)
SPEED_REPEAT_RATIO = "speed.repeat_ratio"  # one repeat's paired speed.ratio (step: the repeat's index)
TIME_REPEAT_CV = "time.repeat_cv"  # coefficient of variation of the repeats' medians (speed.repeats > 1)
TIME_UNSTABLE = "time.unstable"  # 1 when the machine was not quiet while timed (detail: why; optbench.perf.noise)
TIME_CPU_SHARE = "time.cpu_share"  # CPU time the timed process got over the wall time (1: a core to itself)
TIME_COMPILE_S = "time.compile_s"  # a compiled variant's first step (trace and compile)

SPEED_THREADS = "speed.threads"  # CPU threads the step ran with
SPEED_PARAMS_PER_S = "speed.params_per_s"  # parameter elements stepped per second
SPEED_GB_PER_S = "speed.gb_per_s"  # achieved memory bandwidth
SPEED_OVERHEAD = "speed.overhead"  # an edge case's time per stepped parameter over the model's
SPEED_OVERHEAD_CI_LOW = "speed.overhead_ci_low"  # its paired 95% bootstrap interval (interleaved rounds)
SPEED_OVERHEAD_CI_HIGH = "speed.overhead_ci_high"
SPEED_RATIO = "speed.ratio"  # step time over the baseline's (the for-loop, or nearest:), paired rounds
SPEED_RATIO_CI_LOW = "speed.ratio_ci_low"  # its paired 95% bootstrap interval
SPEED_RATIO_CI_HIGH = "speed.ratio_ci_high"
SPEED_RAISES = "speed.raises"  # an edge case raises, as a declared finding says

ROOFLINE_PCT = "roofline.pct"  # the roofline's floor as a percentage of the measured step
ROOFLINE_PCT_CI_LOW = "roofline.pct_ci_low"  # its paired 95% bootstrap interval (interleaved rounds)
ROOFLINE_PCT_CI_HIGH = "roofline.pct_ci_high"
ROOFLINE_FLOOR_ROUND_MS = "roofline.floor_round_ms"  # the floor from round r's probe (step: r), paired
ROOFLINE_BYTES_PER_PARAM = "roofline.bytes_per_param"  # bytes the step must move per parameter element
ROOFLINE_PROBE_GB_PER_S = "roofline.probe_gb_per_s"  # the bandwidth probe's rate at the step's working set
ROOFLINE_MATMUL_GFLOPS = "roofline.matmul_gflops"  # the matmul probe's rate (Muon)

SCALING_PARAMS = "scaling.params"  # parameter elements of a scaling workload
SCALING_TENSORS = "scaling.tensors"  # tensors of a scaling workload

ROUNDTRIP_PREFIX = "roundtrip."
POSITIONAL_PREFIX = "roundtrip.positional."  # torch's own positional load, for contrast


def roundtrip_metric(scenario: str) -> str:
    """The metric of a round-trip scenario loaded by name."""
    return ROUNDTRIP_PREFIX + scenario


def positional_metric(scenario: str) -> str:
    """The metric of a round-trip scenario loaded by torch's positional loader."""
    return POSITIONAL_PREFIX + scenario
