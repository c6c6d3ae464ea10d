"""The sequential rule across checks: state round trips, pending increments, false alarms, detection."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration import TemperatureStats, fit_temperature
from monitoring import DEFAULT_POLICY, DriftPolicy, SequentialState, update_sequential
from tests.strategies import sample_labels

# The tests of the margin's mechanics without reference sums (m = log 1.05); the product's default
# drift side has no margin, and a registered reference's own SE sets m (z · SE_ref).
FIVE_PERCENT = DriftPolicy(temperature_margin=0.05)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def gaussian_increment(
    rng: np.random.Generator, *, n: int, shift: float = 0.0, temperature: float = 1.0, kappa: float = 1.0,
    mean_curvature: float = 1.0,
) -> TemperatureStats:
    """Sums of n rows whose score sum is N(β Σh · shift, κ Σh): the increment the module models."""
    beta = 1.0 / temperature
    curvature = n * mean_curvature
    gradient = rng.normal(beta * curvature * shift, math.sqrt(kappa * curvature))
    return TemperatureStats(temperature=temperature, n=n, gradient_sum=float(gradient),
                            gradient_square_sum=float(kappa * curvature + gradient**2 / n), curvature_sum=curvature)


def run_stream(increments: list[TemperatureStats], **options: object) -> list[object]:
    state = SequentialState.initial(increments[0].temperature)
    checks = []
    for i, increment in enumerate(increments):
        check = update_sequential(state, increment, start=T0 + i * HOUR, end=T0 + (i + 1) * HOUR, **options)  # type: ignore[arg-type]
        state = check.state
        checks.append(check)
    return checks


# ---------------------------------------------------------------------------- the state


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shifts=st.lists(st.floats(-0.4, 0.4), min_size=1, max_size=25),
       sizes=st.lists(st.integers(0, 400), min_size=25, max_size=25))
def test_state_round_trips_through_json_after_any_updates(seed: int, shifts: list[float], sizes: list[int]) -> None:
    rng = np.random.default_rng(seed)
    state = SequentialState.initial(1.7)
    for i, shift in enumerate(shifts):
        n = sizes[i]
        increment = (gaussian_increment(rng, n=n, shift=shift, temperature=1.7) if n
                     else TemperatureStats.empty(1.7))
        state = update_sequential(state, increment, start=T0 + i * HOUR, end=T0 + (i + 1) * HOUR).state
        text = state.to_json()
        assert SequentialState.from_json(text) == state
        assert json.loads(text) == state.to_dict()
        assert len(text) < 1_000  # a version tag holds it easily
    assert state.checks == len(shifts)


def test_small_increments_wait_and_fold_in_as_one() -> None:
    """Two 60-row increments (below min_rows = 100) give the same statistic as one of 120 rows,
    and the candidate change point is the start of the first."""
    rng = np.random.default_rng(3)
    a, b = (gaussian_increment(rng, n=60, shift=0.5) for _ in range(2))
    state = SequentialState.initial(1.0)
    first = update_sequential(state, a, start=T0, end=T0 + HOUR)
    assert not first.folded and math.isnan(first.z) and first.state.pending.n == 60
    assert first.state.pending_since == T0 and first.state.increments == 0
    second = update_sequential(first.state, b, start=T0 + HOUR, end=T0 + 2 * HOUR)
    whole = update_sequential(state, a + b, start=T0, end=T0 + 2 * HOUR)
    assert second.folded and second.z == pytest.approx(whole.z) and second.upper == pytest.approx(whole.upper)
    assert second.state.upper_since == T0 == whole.state.upper_since
    assert second.state.pending.n == 0 and second.state.rows == 120 and second.state.checks == 2


def test_empty_increments_move_nothing_but_the_end() -> None:
    state = SequentialState.initial(2.0)
    check = update_sequential(state, TemperatureStats.empty(2.0), start=T0, end=T0 + HOUR)
    assert not check.folded and check.state.pending_since is None and check.state.last_end == T0 + HOUR


def test_bad_input_is_refused_with_the_reason() -> None:
    state = update_sequential(SequentialState.initial(1.0), TemperatureStats.empty(1.0), start=T0, end=T0 + HOUR).state
    with pytest.raises(ValueError, match="must not overlap"):
        update_sequential(state, TemperatureStats.empty(1.0), start=T0, end=T0 + 2 * HOUR)
    with pytest.raises(ValueError, match="new state"):
        update_sequential(state, TemperatureStats.empty(1.5), start=T0 + HOUR, end=T0 + 2 * HOUR)
    with pytest.raises(ValueError, match="end after"):
        update_sequential(state, TemperatureStats.empty(1.0), start=T0 + HOUR, end=T0 + HOUR)
    with pytest.raises(ValueError, match="timezone"):
        update_sequential(state, TemperatureStats.empty(1.0), start=datetime(2026, 3, 2), end=T0 + 3 * HOUR)
    for text in ("not json", "[]", '{"format": 2}', state.to_json().replace('"upper":0.0', '"upper":-1')):
        with pytest.raises(ValueError, match="sequential state"):
            SequentialState.from_json(text)


# ---------------------------------------------------------------------------- false alarms


def test_false_alarms_at_the_worst_case_stay_below_one_per_720_checks() -> None:
    """Margin 0 and T exact: every step is N(0, 1) − k on both sides, the worst case of the
    stated ARL₀ (1,254 checks). 40 streams of 720 hourly checks: ~22 alarms expected; fewer
    than 40 (one per 720 checks) with probability > 0.999."""
    rng = np.random.default_rng(11)
    alarms = 0
    for _ in range(40):
        checks = run_stream([gaussian_increment(rng, n=150) for _ in range(720)], policy=DriftPolicy(temperature_margin=0.0))
        alarms += sum(check.alarm for check in checks)  # type: ignore[attr-defined]
    assert 5 <= alarms < 40


def test_a_bias_inside_the_margin_does_not_accumulate() -> None:
    """The reference's estimation error is a bias common to every increment. Without the margin
    a CUSUM on increments alarms on it within days (and, the bias staying, escalates at the next
    alarm); with the margin in the reference value it drifts down and stays quiet for 30 days of
    hourly checks."""
    rng = np.random.default_rng(5)
    bias = 0.8 * math.log(1.05)  # T* differs from the fitted T by 4 %: inside the 5 % margin
    increments = [gaussian_increment(rng, n=400, shift=bias) for _ in range(720)]
    without = run_stream(increments, policy=DriftPolicy(temperature_margin=0.0))
    with_margin = run_stream(increments, policy=DriftPolicy(temperature_margin=0.05))
    first = next(i for i, check in enumerate(without) if check.alarm)  # type: ignore[attr-defined]
    assert first < 7 * 24 and any(check.escalated for check in without)  # type: ignore[attr-defined]
    without_escalation = run_stream(increments, policy=DriftPolicy(temperature_margin=0.0,
                                                                   sequential_escalate_after=10**6))
    assert sum(check.alarm for check in without_escalation) >= 10  # type: ignore[attr-defined]
    assert not any(check.alarm for check in with_margin)  # type: ignore[attr-defined]


def test_a_small_reference_widens_the_margin_to_what_it_can_resolve() -> None:
    """m = max(log 1.05, z_0.005 SE_ref): a 500-row reference cannot resolve 5 %, 50,000 rows can."""
    rng = np.random.default_rng(2)
    for n, want in ((500, 2.5758 / math.sqrt(499)), (50_000, math.log(1.05))):
        reference = TemperatureStats(temperature=1.0, n=n, gradient_sum=0.0, gradient_square_sum=float(n),
                                     curvature_sum=float(n))
        check = update_sequential(SequentialState.initial(1.0), gaussian_increment(rng, n=200), start=T0,
                                  end=T0 + HOUR, reference=reference, policy=FIVE_PERCENT)
        # SE(log T) of the reference = sqrt(n s²) / Σh = 1 / sqrt(n − 1) (s² with n − 1).
        assert check.reference_standard_error == pytest.approx(1 / math.sqrt(n - 1))
        assert check.log_margin == pytest.approx(want, rel=1e-4)


def test_the_margin_is_symmetric_in_log_t_not_in_the_score() -> None:
    """A window whose one-step T is exactly 1.05 × T (or T / 1.05) sits on the boundary: its
    step is −k on that side, whatever the size of the increment."""
    for n in (200, 5_000):
        curvature = float(n)
        for target in (math.log(1.05), -math.log(1.05)):
            gradient = target * curvature / (1.0 - target)  # Σg / (Σg + βΣh) = target, β = 1
            increment = TemperatureStats(temperature=1.0, n=n, gradient_sum=gradient, gradient_square_sum=float(n),
                                         curvature_sum=curvature)
            assert increment.log_temperature_shift == pytest.approx(target)
            state = SequentialState.initial(1.0)
            state = replace(state, upper=3.0, lower=3.0)
            check = update_sequential(state, increment, start=T0, end=T0 + HOUR, policy=FIVE_PERCENT)
            side = check.upper if target > 0 else check.lower
            assert side == pytest.approx(3.0 - 0.5)


# ---------------------------------------------------------------------------- detection


def test_a_drift_starting_mid_stream_is_found_with_its_change_point() -> None:
    """Real softmax labels: T fitted on a 3,000-row reference, then hourly increments of 150
    rows; from hour 48 the model is 1.25× over-confident (labels drawn at T / 1.25)."""
    rng = np.random.default_rng(0)
    k = 10

    def rows(n: int, over: float) -> tuple[np.ndarray, np.ndarray]:
        logits = 2.5 * rng.normal(size=(n, k))
        return logits, sample_labels(rng, logits / over)

    ref_logits, ref_labels = rows(3_000, 1.0)
    temperature = fit_temperature(ref_logits, ref_labels).temperature
    reference = TemperatureStats.from_logits(ref_logits, ref_labels, temperature=temperature)
    state = SequentialState.initial(temperature)
    drift_at = 48
    for hour in range(drift_at + 24):
        logits, labels = rows(150, 1.25 if hour >= drift_at else 1.0)
        increment = TemperatureStats.from_logits(logits, labels, temperature=temperature)
        check = update_sequential(state, increment, start=T0 + hour * HOUR, end=T0 + (hour + 1) * HOUR,
                                  reference=reference)
        state = check.state
        if check.alarm:
            break
    assert check.alarm and check.side == "over-confident"
    assert hour < drift_at + 8, f"alarm only at hour {hour}"
    assert check.change_point is not None
    assert abs((check.change_point - (T0 + drift_at * HOUR)) / HOUR) <= 3
    assert check.shift_ratio_low < 1.25 < check.shift_ratio_high * 1.05
    assert check.state.upper == 0.0 and check.state.alarms == 1 and check.state.last_change_point == check.change_point
    assert "ALARM" in check.sentence() and check.threshold == DEFAULT_POLICY.cusum_threshold


def test_collapsed_outputs_alarm_without_an_overflow() -> None:
    """Increments of a collapsed classifier (its logits shrunk to 1e-4 of their scale): an
    under-confident alarm whose segment T ratio and interval are computed in log space."""
    rng = np.random.default_rng(4)
    logits = 2.5 * rng.normal(size=(3_000, 10))
    reference = TemperatureStats.from_logits(logits, sample_labels(rng, logits))
    state = SequentialState.initial(1.0)
    checks = []
    for hour in range(6):
        shrunk = 2.5 * rng.normal(size=(400, 10))  # still ranks the classes, at 1e-4 of the scale
        increment = TemperatureStats.from_logits(1e-4 * shrunk, sample_labels(rng, shrunk))
        check = update_sequential(state, increment, start=T0 + hour * HOUR, end=T0 + (hour + 1) * HOUR,
                                  reference=reference)
        state = check.state
        checks.append(check)
        assert json.dumps(check.to_dict(), allow_nan=False)
    alarm = next(check for check in checks if check.alarm)
    assert alarm.side == "under-confident" and "ALARM" in alarm.sentence()
    assert 0.0 <= alarm.shift_ratio_low <= alarm.shift_ratio <= alarm.shift_ratio_high < 1.0


def test_the_change_point_is_also_given_in_serving_time_when_labels_come_late() -> None:
    """Increments are cut by label arrival; with labels 3 hours late, the rows of the climb were
    served 3 hours before the change point on that clock: where a refit must start reading."""
    hot = TemperatureStats(temperature=1.0, n=500, gradient_sum=150.0, gradient_square_sum=600.0, curvature_sum=500.0)
    calm = TemperatureStats(temperature=1.0, n=500, gradient_sum=0.0, gradient_square_sum=500.0, curvature_sum=500.0)
    small = TemperatureStats(temperature=1.0, n=40, gradient_sum=12.0, gradient_square_sum=48.0, curvature_sum=40.0)
    state = SequentialState.initial(1.0)
    delay = 3 * HOUR
    check = update_sequential(state, calm, start=T0, end=T0 + HOUR, served_from=T0 - delay, policy=FIVE_PERCENT)
    # A small increment waits (pending) and carries its serving time into the fold.
    check = update_sequential(check.state, small, start=T0 + HOUR, end=T0 + 2 * HOUR, served_from=T0 + HOUR - delay,
                              policy=FIVE_PERCENT)
    assert not check.folded and check.state.pending_served_from == T0 + HOUR - delay
    state = SequentialState.from_json(check.state.to_json())  # kept between checks
    check = update_sequential(state, hot, start=T0 + 2 * HOUR, end=T0 + 3 * HOUR, served_from=T0 + 2 * HOUR - delay,
                              policy=FIVE_PERCENT)
    assert not check.alarm and check.state.upper_served_from == T0 + HOUR - delay
    check = update_sequential(check.state, hot, start=T0 + 3 * HOUR, end=T0 + 4 * HOUR,
                              served_from=T0 + 3 * HOUR - delay, policy=FIVE_PERCENT)
    assert check.alarm and check.change_point == T0 + HOUR
    assert check.change_point_served_at == T0 + HOUR - delay
    assert "its rows were served from" in check.sentence()
    assert check.state.upper_served_from is None and check.state.pending_served_from is None  # restarted


def test_a_state_written_before_serving_times_were_kept_is_still_read() -> None:
    state = SequentialState.initial(1.5)
    old = json.loads(state.to_json())
    for key in ("upper_served_from", "lower_served_from", "pending_served_from"):
        del old[key]
    assert SequentialState.from_json(json.dumps(old)) == state


# ---------------------------------------------------------------------------- a reference that is itself off

# A state as the previous release wrote it (an alarm at its third check): it must still load.
_STATE_BEFORE_ESCALATION = (
    '{"format":1,"temperature":1.5,"upper":0.0,"lower":0.0,"upper_since":null,"lower_since":null,'
    '"upper_segment":[0,0.0,0.0,0.0],"lower_segment":[0,0.0,0.0,0.0],"pending":[0,0.0,0.0,0.0],"pending_since":null,'
    '"last_end":"2026-03-01T03:00:00+00:00","checks":3,"increments":3,"rows":600,"alarms":1,'
    '"last_alarm_at":"2026-03-01T03:00:00+00:00","last_change_point":"2026-03-01T00:00:00+00:00",'
    '"upper_served_from":null,"lower_served_from":null,"pending_served_from":null}'
)


def test_a_reference_biased_beyond_the_margin_alarms_once_then_escalates() -> None:
    """The fitted T is 13 % off the traffic's (2.5 margins): calibrated traffic carries that bias
    in every increment. Before: an alarm after every reset (one every few hours for 30 days).
    Now: one alarm (one event), then at the next one on the same side, with every row since the
    reset still beyond the margin, an escalation — and no further alarm for this version."""
    rng = np.random.default_rng(21)
    bias = 2.5 * math.log(1.05)
    checks = run_stream([gaussian_increment(rng, n=400, shift=bias) for _ in range(720)])
    alarms = [check for check in checks if check.alarm]  # type: ignore[attr-defined]
    assert len(alarms) == 1, f"{len(alarms)} alarms on one biased reference"
    escalations = [check for check in checks if check.escalated]  # type: ignore[attr-defined]
    assert len(escalations) == 1 and escalations[0].start > alarms[0].start  # type: ignore[attr-defined]
    escalation, last = escalations[0], checks[-1]
    assert escalation.side == "over-confident" and escalation.shift_ratio > 1.05  # type: ignore[attr-defined]
    assert "the reference itself is off" in escalation.sentence()  # type: ignore[attr-defined]
    state = last.state  # type: ignore[attr-defined]
    assert state.escalated_at == escalation.end and state.escalated_side == "over-confident"  # type: ignore[attr-defined]
    assert state.alarms == 1 and SequentialState.from_json(state.to_json()) == state
    assert "escalated" in last.sentence() and "until a new version" in last.sentence()  # type: ignore[attr-defined]


def test_a_new_drift_long_after_an_alarm_still_alarms() -> None:
    """An hour of drift that alarms at once, two weeks of calibrated traffic, then a real drift on
    the same side for a few hours: the rows since the reset are mostly calibrated, so the second
    alarm is an alarm, not an escalation."""
    rng = np.random.default_rng(8)
    increments = ([gaussian_increment(rng, n=400, shift=0.5)] + [gaussian_increment(rng, n=400) for _ in range(336)]
                  + [gaussian_increment(rng, n=400, shift=0.2) for _ in range(4)])
    checks = run_stream(increments, policy=FIVE_PERCENT)
    alarms = [i for i, check in enumerate(checks) if check.alarm]  # type: ignore[attr-defined]
    assert alarms[0] == 0 and alarms[1] >= 337
    assert not any(check.escalated for check in checks)  # type: ignore[attr-defined]
    assert checks[alarms[1]].state.repeated_alarms == 2  # type: ignore[attr-defined]


def test_a_state_written_before_escalation_existed_still_loads_and_updates() -> None:
    state = SequentialState.from_json(_STATE_BEFORE_ESCALATION)
    assert state.alarms == 1 and state.escalated_at is None and state.escalated_side is None
    hot = TemperatureStats(temperature=1.5, n=200, gradient_sum=60.0, gradient_square_sum=220.0, curvature_sum=200.0)
    check = update_sequential(state, hot, start=T0 + 3 * HOUR, end=T0 + 4 * HOUR)
    assert check.folded and SequentialState.from_json(check.state.to_json()) == check.state
