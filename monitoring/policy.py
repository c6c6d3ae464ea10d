"""The drift policy: every parameter of the monitor's decisions, with its one default and rule.

:class:`DriftPolicy` is a frozen pydantic model holding every knob of the drift decision
(:func:`monitoring.decide_drift`), of the sequential rule (:func:`monitoring.update_sequential`),
of the early warning (:func:`monitoring.warn_before_labels`), of the shift diagnosis
(:func:`monitoring.diagnose_check`) and of the monitor's event rules. Each field's ``Field``
declares, once, its default, its description, its rule (pydantic's constraints: ``gt``/``ge``/
``lt``/``le``, a ``Literal`` of choices) and, in ``json_schema_extra``, the ``THERMOSTAT_*``
setting that overrides it and the flag of ``thermostat drift`` (:class:`Knob`). ``ThermostatSettings``
builds its drift section from these very fields; the command line's defaults and help and the
docs read them. A value that breaks its rule is refused when the policy is built, naming the
field (or the setting or flag it came from) and the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

__all__ = ["DEFAULT_POLICY", "DriftPolicy", "Knob", "policy_knobs"]

Kind = Literal["number", "count", "duration", "choice", "names"]


@dataclass(frozen=True, slots=True)
class Knob:
    """A :class:`DriftPolicy` field's declaration, read from its ``Field``: ``setting`` is the field of
    ``ThermostatSettings`` (``THERMOSTAT_`` + it, upper-cased, its variable); ``flag`` the option of
    ``thermostat drift`` (None: none); ``help`` the description; ``kind`` what the value is; ``rule``
    what it must satisfy, in words (``be in (0, 1) (a significance level)``)."""

    setting: str
    help: str
    kind: Kind
    rule: str
    flag: str | None = None

    @property
    def variable(self) -> str:
        """The environment variable: ``THERMOSTAT_`` + the setting, upper-cased."""
        return f"THERMOSTAT_{self.setting.upper()}"

    def refusal(self, label: str, value: Any, error: ValidationError) -> ValueError | TypeError:
        """pydantic's ``error`` on this field as one line naming ``label`` (the field, or the setting or
        flag the value came from), the rule and ``value``; a TypeError for a value not of its kind."""
        shown = str(value) if isinstance(value, timedelta) else repr(value)
        if error.errors()[0]["type"].endswith(("_type", "_parsing", "_from_float")) and self.kind != "names":
            kind = {"number": "a number", "count": "an integer", "duration": "a duration (ISO 8601, e.g. PT6H)"}
            return TypeError(f"{label} must be {kind.get(self.kind, 'text')}{self.rule[2:]}; got {shown}")
        return ValueError(f"{label} must {self.rule}; got {shown}")


def _knob(default: Any, setting: str, help: str, *, flag: str | None = None, hint: str = "", **rule: Any) -> Any:
    """A field: its default, description and constraints; its setting, flag and hint beside."""
    return Field(default, description=help, json_schema_extra={"setting": setting, "flag": flag, "hint": hint},
                 allow_inf_nan=False if isinstance(default, float) else None, **rule)


def _distinct(names: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(names)) != len(names):  # which tests exist is the registry's to say (monitoring.drift_tests)
        raise ValueError("names a test twice")
    return names


def _split(names: Any) -> Any:
    return tuple(part.strip() for part in names.split(",") if part.strip()) if isinstance(names, str) else names


# Comma-separated text too: THERMOSTAT_DRIFT_TESTS=temperature,ece.
_TestNames = Annotated[tuple[Annotated[str, Field(min_length=1)], ...], BeforeValidator(_split),
                       AfterValidator(_distinct)]
# The ECE estimators the ECE test may use (calibration.ESTIMATORS, spelled here: the numeric core
# stays unloaded; a test holds the two equal).
_Estimator = Literal["binned", "debiased_l2", "debiased_l1", "smooth"]
_ESTIMATORS: Final = get_args(_Estimator)


class DriftPolicy(BaseModel):
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
    >>> policy.replace(seed=7).seed, policy.knob("p_threshold").flag, policy.knob("p_threshold").variable
    (7, '--level', 'THERMOSTAT_DRIFT_P_THRESHOLD')
    >>> policy.replace(min_window=0)  # validated, as any other
    Traceback (most recent call last):
    ...
    ValueError: min_window must be >= 1; got 0
    """

    # strict: a Python caller's "0.5" or True is refused; the settings (lax, from the environment)
    # reuse these fields and hand over values already read by them.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, ser_json_timedelta="float")

    # The decision on one window.
    min_window: int = _knob(500, "min_window", "fewer labelled rows give insufficient_data (nothing is tested)",
        ge=1, flag="--min-window")
    p_threshold: float = _knob(0.01, "drift_p_threshold", "significance level of the decision on a window: its tests "
        "share it, a group's tests share it divided by the groups tested (Bonferroni)",
        gt=0, lt=1, hint="a significance level", flag="--level")
    tests: _TestNames = _knob(("collapsed", "temperature", "ece"), "drift_tests", "the drift tests a window and each "
        "tested group run, in this order (comma-separated names)", min_length=1, strict=False)  # a list too
    temperature_margin: float = _knob(0.03, "drift_temperature_margin", "relative shift of T the temperature test's "
        "drift side requires (0.03: beyond 1.03 or below 1/1.03 times the reference's T; a refit gains nothing "
        "measurable below it)", ge=0, lt=1, hint="the relative shift of T that counts", flag="--margin")
    equivalence_margin: float = _knob(0.10, "drift_equivalence_margin", "relative shift of T within which a window "
        "counts as calibrated once its T interval lies inside it (a shift whose refit gains nothing worth having on "
        "fresh traffic)",
        ge=0, lt=1, hint="the relative shift of T that counts as calibrated", flag="--equivalence-margin")
    equivalence_level: float = _knob(0.05, "drift_equivalence_level", "level of the equivalence test: the chance of "
        "calling a window calibrated whose T is off by exactly the equivalence margin",
        gt=0, lt=1, hint="a significance level")
    min_expected_errors: float = _knob(5.0, "drift_min_expected_errors", "the temperature test runs only when the "
        "window and the reference each expect at least this many errors at T (fewer: a handful of errors would carry "
        "it)", ge=0)
    ece_tolerance: float = _knob(0.02, "drift_ece_tolerance", "how far above the reference's ECE the window's must be "
        "to count, beyond both intervals", ge=0, hint="an ECE difference", flag="--tolerance")
    ece_estimator: _Estimator = _knob("debiased_l1", "drift_ece_estimator", "the calibration-error estimator of the "
        "ECE test (the reference's registered ECE must use the same one)")
    collapse_spread_ratio: float = _knob(0.01, "drift_collapse_spread_ratio", "the outputs collapsed when the "
        "variance of z/T per row falls below this share of the reference's", gt=0, lt=1)
    min_group_size: int = _knob(200, "drift_min_group_size", "groups with fewer labelled rows are not tested",
        ge=1, flag="--min-group-size")
    confidence_level: float = _knob(0.95, "drift_confidence_level", "level of the intervals reported with a check and "
        "registered with a version (T, ECE, predicted accuracy)",
        gt=0, lt=1, hint="e.g. 0.95", flag="--confidence-level")
    n_resamples: int = _knob(1000, "drift_resamples", "resamples of the bootstrap intervals and of the consistency "
        "test's null ECE", ge=100, le=1_000_000, flag="--resamples")
    seed: int = _knob(0, "seed", "seed of the resampling (and of the pipeline's split and bootstrap)",
        ge=0, flag="--seed")
    min_bin_count: int = _knob(10, "min_bin_count", "reliability bins with fewer rows are marked sparse (noise)", ge=1)
    # Between checks: the cool-down, the sequential rule, the early warning, the streak.
    cooldown: timedelta = _knob(timedelta(hours=6), "drift_cooldown", "after a drift event, no further drift event "
        "for this long per version (ISO 8601, e.g. PT6H)", ge=timedelta(0))
    cusum_reference: float = _knob(0.5, "drift_cusum_reference", "k, the sequential rule's reference value in "
        "standard deviations per increment", ge=0)
    cusum_threshold: float = _knob(6.0, "drift_cusum_threshold", "h, the sequential rule's alarm threshold in "
        "standard deviations", gt=0)
    sequential_min_rows: int = _knob(100, "drift_sequential_min_rows", "increments of the sequential rule with fewer "
        "labelled rows wait for the next check", ge=1)
    sequential_escalate_after: int = _knob(2, "drift_sequential_escalate_after", "the sequential rule escalates "
        "instead of alarming at this many alarms in a row on one side of a version while every row since the previous "
        "alarm still fires the temperature test: the reference itself is off; no further alarm until a new version",
        ge=2)
    label_settle_time: timedelta = _knob(timedelta(minutes=5), "label_settle_time", "the sequential rule reads labels "
        "that arrived up to this long before a check (ISO 8601, e.g. PT5M)", ge=timedelta(0))
    confidence_shift_level: float = _knob(0.01, "confidence_shift_level", "significance level of the early warning's "
        "test of the served confidences against the registration reference", gt=0, lt=1)
    shift_min_rows: int = _knob(100, "confidence_shift_min_rows", "the early warning tests the served confidences "
        "only with this many rows in the window and in the reference", ge=2)
    # The shift diagnosis (which shift a check saw: calibration.diagnose_shift).
    diagnosis_level: float = _knob(0.01, "diagnosis_level", "family-wise level of the shift diagnosis's \"no "
        "change\": the test of the served rows' class priors against the version's reference and the test of their "
        "confidences share it (weighted Holm: 0.9 and 0.1 of it first), so unchanged traffic is called a shift at "
        "most this often by them", gt=0, lt=1)
    prior_shift_level: float = _knob(0.01, "prior_shift_level", "significance level of the shift diagnosis's tests "
        "once the class priors moved: the labelled rows' per-class accuracies, the re-weighting's NLL gain", gt=0, lt=1)
    prior_min_rows: int = _knob(100, "prior_shift_min_rows", "the shift diagnosis tests the class priors only with "
        "this many served rows in the window", ge=2)
    prior_sample_capacity: int = _knob(2000, "prior_sample_capacity", "served rows a check keeps, a uniform sample, "
        "to estimate the class priors by EM: its memory is this many posteriors whatever the window's size", ge=10)
    insufficient_data_streak: int = _knob(3, "insufficient_data_streak", "this many insufficient_data checks of a "
        "version in a row raise an alert", ge=1)
    undetermined_streak: int = _knob(24, "undetermined_streak", "this many undetermined checks of a version in a row "
        "(no drift seen, calibration not established) raise an alert: the monitor could not have seen a drift of the "
        "margin's size", ge=1)

    if not TYPE_CHECKING:  # type checkers keep the signature pydantic declares, field by field
        def __init__(self, /, **values: Any) -> None:
            _validate(self, values, lambda name: name)

    @classmethod
    def from_values(cls, values: Mapping[str, Any], label: Callable[[str, Knob], str]) -> DriftPolicy:
        """The policy from ``values`` (by field name; the rest default), a refusal naming the value
        by ``label(field, knob)`` — e.g. its ``THERMOSTAT_*`` variable or its command-line flag.

        >>> DriftPolicy.from_values({"p_threshold": 2.0}, lambda name, knob: knob.flag or name)
        Traceback (most recent call last):
        ...
        ValueError: --level must be in (0, 1) (a significance level); got 2.0
        """
        return _validate(cls.__new__(cls), values, lambda name: label(name, _KNOBS[name]))

    def replace(self, **changes: Any) -> DriftPolicy:
        """This policy with ``changes``, validated as any other (``model_copy`` would not check them)."""
        return type(self)(**(dict(self) | changes))

    @staticmethod
    def knob(name: str) -> Knob:
        """The declaration of field ``name``."""
        return _KNOBS[name]

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-safe (durations in seconds, the tests as a list)."""
        return self.model_dump(mode="json")

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
        known = {name: value for name, value in values.items() if name in _KNOBS}
        return _validate(cls.__new__(cls), known, lambda name: f"{where}: {name}", strict=False)  # JSON's forms


def _validate(policy: DriftPolicy, values: Mapping[str, Any], label: Callable[[str], str],
              strict: bool | None = None) -> DriftPolicy:
    """``policy`` holding ``values`` validated as pydantic's ``__init__`` does (``model_validate`` would
    call ours), or the refusal of the first field that breaks its rule, named by ``label(field)``."""
    try:
        DriftPolicy.__pydantic_validator__.validate_python(values, strict=strict, self_instance=policy)
    except ValidationError as error:
        problem = error.errors()[0]
        name = str(problem["loc"][0]) if problem["loc"] else ""
        if name not in _KNOBS:
            raise TypeError(f"DriftPolicy has no field {name!r}") from None
        raise _KNOBS[name].refusal(label(name), values.get(name, problem.get("input")), error) from None
    return policy


def _rule(info: FieldInfo, kind: Kind) -> str:
    """What a value must satisfy, in words, from the field's constraints: ``be in (0, 1)``, ``be >= 1``."""
    if kind in ("choice", "names"):
        return f"be one of {list(_ESTIMATORS)}" if kind == "choice" else "name at least one drift test, each once"
    bounds = {key: f"{bound.total_seconds():g} seconds" if isinstance(bound, timedelta) else f"{bound:,}"
              if abs(bound) >= 10_000 else f"{bound:g}" for item in info.metadata for key in ("gt", "ge", "lt", "le")
              if (bound := getattr(item, key, None)) is not None}
    low, high = bounds.get("gt", bounds.get("ge")), bounds.get("lt", bounds.get("le"))
    words = (f"in {'(' if 'gt' in bounds else '['}{low}, {high}{')' if 'lt' in bounds else ']'}" if low and high
             else ("finite and " if kind == "number" else "") + next(
                 f"{sign} {bounds[key]}" for key, sign in (("gt", ">"), ("ge", ">="), ("le", "<=")) if key in bounds))
    hint = info.json_schema_extra.get("hint") if isinstance(info.json_schema_extra, dict) else ""
    return f"be {words} ({hint})" if hint else f"be {words}"


def _knob_of(info: FieldInfo) -> Knob:
    """A field's :class:`Knob`: its kind from its type, its setting and flag from ``json_schema_extra``."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    kinds: dict[Any, Kind] = {int: "count", float: "number", timedelta: "duration"}
    kind = kinds.get(info.annotation, "choice" if get_args(info.annotation) == _ESTIMATORS else "names")
    return Knob(str(extra["setting"]), info.description or "", kind, _rule(info, kind),
                None if extra.get("flag") is None else str(extra["flag"]))


_KNOBS: Final = {name: _knob_of(info) for name, info in DriftPolicy.model_fields.items()}
DEFAULT_POLICY: Final = DriftPolicy()


def policy_knobs() -> tuple[tuple[str, Knob, Any], ...]:
    """Every field of :class:`DriftPolicy`: its name, its :class:`Knob` and its default.

    >>> name, knob, default = policy_knobs()[0]
    >>> name, knob.variable, knob.flag, default
    ('min_window', 'THERMOSTAT_MIN_WINDOW', '--min-window', 500)
    """
    return tuple((name, knob, getattr(DEFAULT_POLICY, name)) for name, knob in _KNOBS.items())
