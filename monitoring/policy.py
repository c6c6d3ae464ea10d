"""The drift policy: every parameter of the monitor's decisions, with its one default and rule.

:class:`DriftPolicy` is a frozen value holding every knob of the drift decision
(:func:`monitoring.decide_drift`), of the sequential rule (:func:`monitoring.update_sequential`),
of the early warning (:func:`monitoring.warn_before_labels`), of the shift diagnosis
(:func:`monitoring.diagnose_check`) and of the monitor's event rules. Each field declares, once:

* its default;
* its rule (a :class:`calibration.Interval`, or the choices of a text field);
* the ``THERMOSTAT_*`` setting that overrides it (``ThermostatSettings`` builds its drift
  section from these declarations: :attr:`Knob.setting`);
* the command-line flag that overrides it in ``thermostat drift`` (:attr:`Knob.flag`), whose
  default and help text come from here.

So a default lives here and nowhere else: the settings, the command line and the docs read it.
A value that breaks its rule is refused when the policy is built, naming the field (or the
setting or flag it came from) and the rule.

Stdlib only (and :class:`calibration.Interval`, itself stdlib only): the command line reads the
defaults without loading the numeric core.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal

from calibration import Interval

__all__ = ["DEFAULT_POLICY", "DriftPolicy", "Knob", "policy_knobs"]

_PROBABILITY: Final = Interval(0.0, 1.0, low_closed=False, high_closed=False)


@dataclass(frozen=True, slots=True)
class Knob:
    """What a :class:`DriftPolicy` field declares beside its default.

    ``setting`` is the field of ``ThermostatSettings`` (and, upper-cased with the prefix
    ``THERMOSTAT_``, its environment variable); ``flag`` the option of ``thermostat drift``
    (None: not a flag); ``help`` one line for both; ``kind`` what the value is (a real number, a
    count, a duration, one of ``choices``, or a tuple of names); ``interval`` the rule of a
    number (seconds for a duration).
    """

    setting: str
    help: str
    kind: Literal["number", "count", "duration", "choice", "names"]
    interval: Interval | None = None
    flag: str | None = None
    choices: tuple[str, ...] = ()

    @property
    def variable(self) -> str:
        """The environment variable: ``THERMOSTAT_`` + the setting, upper-cased."""
        return f"THERMOSTAT_{self.setting.upper()}"


def _knob(default: Any, setting: str, help: str, *, interval: Interval | None = None, flag: str | None = None,
          choices: tuple[str, ...] = ()) -> Any:
    kind: Literal["number", "count", "duration", "choice", "names"] = (
        "duration" if isinstance(default, timedelta) else "names" if isinstance(default, tuple)
        else "choice" if choices else "count" if interval is not None and interval.integer else "number")
    return field(default=default, metadata={"knob": Knob(setting, help, kind, interval, flag, choices)})


# The ECE estimators the ECE test may use (calibration.ESTIMATORS, spelled here to stay stdlib-only;
# a test holds the two equal).
_ESTIMATORS: Final = ("binned", "debiased_l2", "debiased_l1", "smooth")


@dataclass(frozen=True, slots=True)
class DriftPolicy:
    """Every parameter of the monitor's decisions (module docstring); the defaults are the product's.

    Examples
    --------
    >>> policy = DriftPolicy()
    >>> policy.p_threshold, policy.tests
    (0.01, ('collapsed', 'temperature', 'ece'))
    >>> DriftPolicy(temperature_margin=1.5)
    Traceback (most recent call last):
    ...
    ValueError: temperature_margin must be in [0, 1) (the relative shift of T that counts); got 1.5
    >>> policy.knob("p_threshold").flag, policy.knob("p_threshold").variable
    ('--level', 'THERMOSTAT_DRIFT_P_THRESHOLD')
    """

    # The decision on one window.
    min_window: int = _knob(500, "min_window", "fewer labelled rows give insufficient_data (nothing is tested)",
                            interval=Interval(1, integer=True), flag="--min-window")
    p_threshold: float = _knob(
        0.01, "drift_p_threshold", "significance level of the decision on a window: its tests share it, a group's "
        "tests share it divided by the groups tested (Bonferroni)",
        interval=Interval(0.0, 1.0, low_closed=False, high_closed=False, hint="a significance level"), flag="--level")
    tests: tuple[str, ...] = _knob(
        ("collapsed", "temperature", "ece"), "drift_tests", "the drift tests a window and each tested group run, in this order "
        "(comma-separated names)")
    temperature_margin: float = _knob(
        0.03, "drift_temperature_margin", "relative shift of T the temperature test's drift side requires (0.03: "
        "beyond 1.03 or below 1/1.03 times the reference's T; a refit gains nothing measurable below it)",
        interval=Interval(0.0, 1.0, high_closed=False, hint="the relative shift of T that counts"), flag="--margin")
    equivalence_margin: float = _knob(
        0.10, "drift_equivalence_margin", "relative shift of T within which a window counts as calibrated once its "
        "T interval lies inside it (a shift whose refit gains nothing worth having on fresh traffic)",
        interval=Interval(0.0, 1.0, high_closed=False, hint="the relative shift of T that counts as calibrated"),
        flag="--equivalence-margin")
    equivalence_level: float = _knob(
        0.05, "drift_equivalence_level", "level of the equivalence test: the chance of calling a window calibrated "
        "whose T is off by exactly the equivalence margin",
        interval=Interval(0.0, 1.0, low_closed=False, high_closed=False, hint="a significance level"))
    min_expected_errors: float = _knob(
        5.0, "drift_min_expected_errors", "the temperature test runs only when the window and the reference each expect "
        "at least this many errors at T (fewer: a handful of errors would carry it)", interval=Interval(0.0))
    ece_tolerance: float = _knob(
        0.02, "drift_ece_tolerance", "how far above the reference's ECE the window's must be to count, beyond both "
        "intervals", interval=Interval(0.0, hint="an ECE difference"), flag="--tolerance")
    ece_estimator: str = _knob(
        "debiased_l1", "drift_ece_estimator", "the calibration-error estimator of the ECE test (the reference's "
        "registered ECE must use the same one)", choices=_ESTIMATORS)
    collapse_spread_ratio: float = _knob(
        0.01, "drift_collapse_spread_ratio", "the outputs collapsed when the variance of z/T per row falls below this "
        "share of the reference's", interval=Interval(0.0, 1.0, low_closed=False, high_closed=False))
    min_group_size: int = _knob(200, "drift_min_group_size", "groups with fewer labelled rows are not tested",
                                interval=Interval(1, integer=True), flag="--min-group-size")
    confidence_level: float = _knob(
        0.95, "drift_confidence_level", "level of the intervals reported with a check and registered with a "
        "version (T, ECE, predicted accuracy)", interval=Interval(0.0, 1.0, low_closed=False, high_closed=False,
                                                                   hint="e.g. 0.95"), flag="--confidence-level")
    n_resamples: int = _knob(
        1000, "drift_resamples", "resamples of the bootstrap intervals and of the consistency test's null ECE",
        interval=Interval(100, 1_000_000, integer=True), flag="--resamples")
    seed: int = _knob(0, "seed", "seed of the resampling (and of the pipeline's split and bootstrap)",
                      interval=Interval(0, integer=True), flag="--seed")
    min_bin_count: int = _knob(10, "min_bin_count", "reliability bins with fewer rows are marked sparse (noise)",
                               interval=Interval(1, integer=True))
    # Between checks: the cool-down, the sequential rule, the early warning, the streak.
    cooldown: timedelta = _knob(
        timedelta(hours=6), "drift_cooldown", "after a drift event, no further drift event for this long per "
        "version (ISO 8601, e.g. PT6H)", interval=Interval(0.0))
    cusum_reference: float = _knob(
        0.5, "drift_cusum_reference", "k, the sequential rule's reference value in standard deviations per "
        "increment", interval=Interval(0.0))
    cusum_threshold: float = _knob(
        6.0, "drift_cusum_threshold", "h, the sequential rule's alarm threshold in standard deviations",
        interval=Interval(0.0, low_closed=False))
    sequential_min_rows: int = _knob(
        100, "drift_sequential_min_rows", "increments of the sequential rule with fewer labelled rows wait for the "
        "next check", interval=Interval(1, integer=True))
    sequential_escalate_after: int = _knob(
        2, "drift_sequential_escalate_after", "the sequential rule escalates instead of alarming at this many alarms "
        "in a row on one side of a version while every row since the previous alarm still fires the temperature "
        "test: the reference itself is off; no further alarm until a new version", interval=Interval(2, integer=True))
    label_settle_time: timedelta = _knob(
        timedelta(minutes=5), "label_settle_time", "the sequential rule reads labels that arrived up to this long "
        "before a check (ISO 8601, e.g. PT5M)", interval=Interval(0.0))
    confidence_shift_level: float = _knob(
        0.01, "confidence_shift_level", "significance level of the early warning's test of the served confidences "
        "against the registration reference", interval=_PROBABILITY)
    shift_min_rows: int = _knob(
        100, "confidence_shift_min_rows", "the early warning tests the served confidences only with this many rows "
        "in the window and in the reference", interval=Interval(2, integer=True))
    # The shift diagnosis (which shift a check saw: calibration.diagnose_shift).
    diagnosis_level: float = _knob(
        0.01, "diagnosis_level", "family-wise level of the shift diagnosis's \"no change\": the test of the served rows' "
        "class priors against the version's reference and the test of their confidences share it (weighted Holm: 0.9 "
        "and 0.1 of it first), so unchanged "
        "traffic is called a shift at most this often by them", interval=_PROBABILITY)
    prior_shift_level: float = _knob(
        0.01, "prior_shift_level", "significance level of the shift diagnosis's tests once the class priors moved: the "
        "labelled rows' per-class accuracies, the re-weighting's NLL gain", interval=_PROBABILITY)
    prior_min_rows: int = _knob(
        100, "prior_shift_min_rows", "the shift diagnosis tests the class priors only with this many served rows in "
        "the window", interval=Interval(2, integer=True))
    prior_sample_capacity: int = _knob(
        2000, "prior_sample_capacity", "served rows a check keeps, a uniform sample, to estimate the class priors by "
        "EM: its memory is this many posteriors whatever the window's size", interval=Interval(10, integer=True))
    insufficient_data_streak: int = _knob(
        3, "insufficient_data_streak", "this many insufficient_data checks of a version in a row raise an alert",
        interval=Interval(1, integer=True))
    undetermined_streak: int = _knob(
        24, "undetermined_streak", "this many undetermined checks of a version in a row (no drift seen, calibration "
        "not established) raise an alert: the monitor could not have seen a drift of the margin's size",
        interval=Interval(1, integer=True))

    def __post_init__(self) -> None:
        for name, knob in _knobs():
            try:
                object.__setattr__(self, name, _checked(getattr(self, name), knob, name))
            except (TypeError, ValueError) as error:
                setattr(error, "policy_field", name)  # for from_values, to name the value by its source
                raise

    @classmethod
    def from_values(cls, values: Mapping[str, Any], label: Callable[[str, Knob], str]) -> DriftPolicy:
        """The policy from ``values`` (by field name; the rest default), a refusal naming the value
        by ``label(field, knob)`` — e.g. its ``THERMOSTAT_*`` variable or its command-line flag.

        >>> DriftPolicy.from_values({"p_threshold": 2.0}, lambda name, knob: knob.flag or name)
        Traceback (most recent call last):
        ...
        ValueError: --level must be in (0, 1) (a significance level); got 2.0
        """
        try:
            return cls(**values)
        except (TypeError, ValueError) as error:
            name = getattr(error, "policy_field", None)
            if name is None:
                raise
            raise type(error)(label(name, cls.knob(name)) + str(error)[len(name):]) from None

    @staticmethod
    def knob(name: str) -> Knob:
        """The declaration of field ``name``."""
        return dict(_knobs())[name]

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-safe (durations in seconds, the tests as a list)."""
        return {
            name: value.total_seconds() if isinstance(value, timedelta) else list(value) if isinstance(value, tuple)
            else value
            for name, value in ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, where: str = "the policy") -> DriftPolicy:
        """Read back what :meth:`to_dict` wrote (durations in seconds, the tests as a list).

        A name this version does not know (written by a later one) is left out, a field missing
        (written before it existed) takes its default; a value that breaks its rule is refused,
        the message naming ``where`` and the field.

        >>> policy = DriftPolicy(ece_tolerance=0.05, cooldown=timedelta(hours=1))
        >>> DriftPolicy.from_dict(policy.to_dict()) == policy
        True
        >>> DriftPolicy.from_dict({"min_window": 0, "a_later_knob": 1}, where="tag 'thermostat.policy'")
        Traceback (most recent call last):
        ...
        ValueError: tag 'thermostat.policy': min_window must be >= 1; got 0
        """
        knobs = dict(_knobs())
        read: dict[str, Any] = {}
        for name, value in values.items():
            knob = knobs.get(name)
            if knob is None:
                continue
            if knob.kind == "duration" and isinstance(value, (int, float)) and not isinstance(value, bool):
                value = timedelta(seconds=value)
            elif knob.kind == "names" and isinstance(value, list):
                value = tuple(value)
            read[name] = value
        return cls.from_values(read, lambda name, knob: f"{where}: {name}")


def _checked(value: Any, knob: Knob, name: str) -> Any:
    """``value`` checked by the knob's declared rule, or a refusal naming ``name``."""
    if knob.kind == "duration":
        return knob.interval.check_duration(value, name=name)  # type: ignore[union-attr]  # declared with one
    if knob.kind == "count":
        return knob.interval.check_count(value, name=name)  # type: ignore[union-attr]
    if knob.kind == "number":
        return knob.interval.check(value, name=name)  # type: ignore[union-attr]
    if knob.kind == "choice":
        if value not in knob.choices:
            raise ValueError(f"{name} must be one of {list(knob.choices)}; got {value!r}")
        return value
    # The tests' names: which exist is the registry's to say (monitoring.drift_tests), when they run.
    names = tuple(value) if isinstance(value, (tuple, list)) else value
    if not isinstance(names, tuple) or not names or len(set(names)) != len(names) or not all(
            isinstance(item, str) and item for item in names):
        raise ValueError(f"{name} must name at least one drift test, each once; got {value!r}")
    return names


def _knobs() -> Iterator[tuple[str, Knob]]:
    for f in dataclasses.fields(DriftPolicy):
        yield f.name, f.metadata["knob"]


def policy_knobs() -> tuple[tuple[str, Knob, Any], ...]:
    """Every field of :class:`DriftPolicy`: its name, its :class:`Knob` and its default.

    >>> name, knob, default = policy_knobs()[0]
    >>> name, knob.variable, knob.flag, default
    ('min_window', 'THERMOSTAT_MIN_WINDOW', '--min-window', 500)
    """
    defaults = DriftPolicy()
    return tuple((name, knob, getattr(defaults, name)) for name, knob in _knobs())


DEFAULT_POLICY: Final = DriftPolicy()
