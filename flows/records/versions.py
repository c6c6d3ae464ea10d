"""A registered version's record: one typed value, written as MLflow tags and read back.

:class:`VersionRecord` is everything stored with a version at registration — T and its
search bounds, the gate, the checkpoint and its digest, the data versions, the holdout
evidence, the binning (scheme and bin count as separate fields), provenance and, for a refit,
:class:`RefitProvenance`. :meth:`VersionRecord.to_tags` writes it, :meth:`VersionRecord.from_tags`
reads it back field for field (a round trip gives the same record); the pyfunc's
``model_config`` and the run's parameters come from the same record. Nothing is parsed from
prose: the one human-readable tag, ``ece_binning``, is derived from the binning fields. Tags of
versions registered before the binning had fields of its own are read by a legacy reader.

With the record, the registration writes :class:`RegisteredFor`: the alias it moved and the
version that held it (``thermostat.alias``, ``thermostat.alias_previous_version``).

A few tags are monitoring metadata, written by the monitor after registration (T, the
threshold and the evidence never change):

* ``thermostat.last_drift_event_at``: the time of the last drift *event* emitted for the
  version (the cool-down: one drift does not start a storm of refits);
* ``thermostat.sequential_state``: the sequential rule's state between checks
  (:class:`monitoring.SequentialState` as JSON);
* ``thermostat.insufficient_data_streak``: how many checks in a row had too few labels;
* ``thermostat.last_confidence_shift_at``: the time of the last early-warning event (its own
  cool-down);
* ``thermostat.last_label_shift_at``: the time of the last label-shift event (its own cool-down).

No MLflow here: the flows read the tags through :class:`flows.registry.adapter.MlflowRegistry` and
pass them in.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from calibration import PriorCorrection, ReadThrough, ReferencePriors, TemperatureStats
from monitoring import ConfidenceProfile, DriftReference, SequentialState

__all__ = [
    "ALIAS_TAG",
    "INSUFFICIENT_STREAK_TAG",
    "UNDETERMINED_STREAK_TAG",
    "LAST_CONFIDENCE_SHIFT_TAG",
    "LAST_DRIFT_EVENT_TAG",
    "LAST_LABEL_SHIFT_TAG",
    "PREVIOUS_ALIAS_VERSION_TAG",
    "REGISTRATION_TAG",
    "SEQUENTIAL_STATE_TAG",
    "CheckpointOutput",
    "MonitorState",
    "RefitProvenance",
    "RegisteredFor",
    "RegisteredVersion",
    "VersionRecord",
    "aware_time",
    "binning_convention",
    "encode_reference_priors",
    "reference_priors_may_fit",
    "json_object_tag",
    "registered_by_thermostat",
    "registered_version",
    "serving_versions",
    "version_context",
]

LAST_DRIFT_EVENT_TAG = "thermostat.last_drift_event_at"
SEQUENTIAL_STATE_TAG = "thermostat.sequential_state"
INSUFFICIENT_STREAK_TAG = "thermostat.insufficient_data_streak"
UNDETERMINED_STREAK_TAG = "thermostat.undetermined_streak"
LAST_CONFIDENCE_SHIFT_TAG = "thermostat.last_confidence_shift_at"
LAST_LABEL_SHIFT_TAG = "thermostat.last_label_shift_at"
ALIAS_TAG = "thermostat.alias"
PREVIOUS_ALIAS_VERSION_TAG = "thermostat.alias_previous_version"
REGISTRATION_TAG = "thermostat.registration"
"""A version's registration state: ``pending`` from its creation, ``complete`` once its alias
moved and its run closed (the last write of a registration)."""

CheckpointOutput = Literal["logits", "probabilities"]
"""What a checkpoint's ``predict`` returns; probabilities are turned into logits by their log."""

_NONE = "none"
# MLflow keeps at most 100,000 characters of a model version's tag value.
_VERSION_TAG_LIMIT = 100_000


def binning_convention(n_bins: int, scheme: str) -> str:
    """The binning an ECE was measured with, in words (shown with every ECE; never parsed).

    >>> binning_convention(15, "equal-width")
    'equal-width, 15 bins, top-label confidence, bin m = (m/M, (m+1)/M], 0 in the first bin'
    """
    return f"{scheme}, {n_bins} bins, top-label confidence, bin m = (m/M, (m+1)/M], 0 in the first bin"


def _encode(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # every digit: the tag gives back the exact float64 that was applied
    if isinstance(value, tuple):
        return ",".join(_encode(item) for item in value)
    if isinstance(value, PriorCorrection):
        return value.to_json()
    return str(value)


def _decode(text: str, kind: Any, where: str, key: str) -> Any:
    """``text`` read as ``kind`` (a field's type), or a ValueError naming the tag."""
    optional = typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind)
    if optional:
        if text == _NONE:
            return None
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
    try:
        if kind is float:
            value = float(text)
            if math.isnan(value):
                raise ValueError("NaN")
            return value
        if kind is int:
            return int(text)
        if kind is PriorCorrection:
            return PriorCorrection.from_json(text)
        if typing.get_origin(kind) is tuple:
            return tuple(float(part) for part in text.split(","))
        if typing.get_origin(kind) is Literal:
            if text not in typing.get_args(kind):
                raise ValueError(f"not one of {list(typing.get_args(kind))}")
            return text
    except ValueError as error:
        raise ValueError(f"{where}: tag {key!r} is {text!r}; expected {getattr(kind, '__name__', kind)} ({error})") from error
    return text


class _TaggedRecord:
    """``to_tags``/``from_tags`` for a frozen dataclass whose fields are tag values."""

    __slots__ = ()
    _PREFIX = ""

    def to_tags(self) -> dict[str, str]:
        if not dataclasses.is_dataclass(self):  # pragma: no cover - a programming error
            raise TypeError(type(self).__name__)
        return {self._PREFIX + field.name: _encode(getattr(self, field.name)) for field in dataclasses.fields(self)}

    @classmethod
    def _from_tags(cls, tags: Mapping[str, str], where: str) -> dict[str, Any]:
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        missing = []
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            key = cls._PREFIX + field.name
            if key in tags:
                values[field.name] = _decode(tags[key], hints[field.name], where, key)
            elif field.default is dataclasses.MISSING:
                missing.append(key)
        if missing:
            raise ValueError(
                f"{where} lacks the registration tag(s) {missing}; only versions registered by Thermostat's "
                "post-finetune or refit flows carry the T, gate and baseline a check needs"
            )
        return values


@dataclass(frozen=True, slots=True)
class RefitProvenance(_TaggedRecord):
    """Where a refit's version comes from (tags ``refit_*``): the parent, its traffic, the check."""

    _PREFIX = "refit_"

    parent_version: str
    parent_temperature: float
    parent_gate_threshold: float | None
    parent_baseline_ece: float
    alias: str
    traffic_window: str
    traffic_first_served_at: str
    traffic_last_served_at: str
    traffic_n: int
    fit_n: int
    verify_n: int
    split: str
    verification: str
    verification_p_value: float | None
    verification_shape: str


@dataclass(frozen=True, slots=True)
class VersionRecord(_TaggedRecord):
    """Everything stored with a registered version, typed; see the module docstring.

    ``holdout_*`` figures are measured on the evaluation part of the holdout (for a refit: the
    newer part of its traffic), never on the rows that fitted T; the NLL is the mean in nats,
    the ECE uses ``ece_n_bins`` bins of ``ece_scheme``.

    What the drift decision needs of the reference (None on versions registered before they
    were stored; such a version is tested against T as if T were exact, and against its
    binned ECE without an interval):

    * ``temperature_low``/``temperature_high``: the fit's ``temperature_confidence_level``
      interval of T (:class:`calibration.TemperatureFit`); a refit whose new T lies inside
      its parent's interval is not a fix;
    * ``reference_n``, ``reference_gradient_sum``, ``reference_gradient_square_sum``,
      ``reference_curvature_sum``, ``reference_expected_errors``: the temperature test's sums over the calibration part at
      the registered T (:class:`calibration.TemperatureStats`): the reference's estimation
      error of T, which the two-sample temperature test counts;
    * ``reference_ece`` [``reference_ece_low``, ``reference_ece_high``]: the
      ``reference_ece_estimator`` ECE of the evaluation part at T with its interval (at
      ``temperature_confidence_level``), the ECE test's reference.
    * ``reference_confidence_profile``: the calibration part's confidences at T, binned
      (:class:`monitoring.ConfidenceProfile` as JSON): the early warning's reference.
    * ``reference_prior_sums``: the calibration part's class counts, sums of the calibrated
      posteriors and of their outer products, and confusion matrix at T
      (:class:`calibration.ReferencePriors` as JSON, :func:`encode_reference_priors`): the
      reference of the shift diagnosis's prior test. None on a version registered before it was
      stored (or whose K is too large for a tag): its checks diagnose no label shift, and say so.

    ``prior_correction`` (tag ``prior_correction``, :class:`calibration.PriorCorrection` as
    JSON; absent on a version without one): the class priors a label-shift fix re-weights the
    served posteriors to, and the priors they were calibrated for.

    Examples
    --------
    >>> record = VersionRecord.example()
    >>> VersionRecord.from_tags(record.to_tags()) == record
    True
    >>> record.to_tags()["ece_binning"]
    'equal-width, 15 bins, top-label confidence, bin m = (m/M, (m+1)/M], 0 in the first bin'
    """

    temperature: float
    temperature_bounds: tuple[float, float]
    gate_threshold: float | None
    gate_target_accuracy: float
    gate_confidence_level: float
    gate_coverage: float | None
    gate_accepted_accuracy: float | None
    checkpoint_uri: str
    checkpoint_digest: str
    calibration_data_version: str
    calibration_n: int
    holdout_data_version: str
    holdout_accuracy: float
    holdout_metrics_n: int
    holdout_metrics_split: str
    holdout_nll_before: float | None
    holdout_nll_after: float | None
    holdout_ece_before: float
    holdout_ece_after: float
    nll_reduction: str
    bootstrap_nll_change: float | None
    bootstrap_nll_change_low: float | None
    bootstrap_nll_change_high: float | None
    bootstrap_confidence_level: float
    bootstrap_verdict: str
    ece_scheme: str
    ece_n_bins: int
    fitted_at: str
    idempotency_key: str
    pipeline_run_id: str
    checkpoint_output: CheckpointOutput = "logits"
    train_steps: int = 0
    train_data_version: str = "unknown"
    # A refit's version: the parent's T (the "before" of the holdout figures) and its provenance.
    temperature_before: float | None = None
    holdout_accuracy_source: str | None = None
    temperature_low: float | None = None
    temperature_high: float | None = None
    temperature_confidence_level: float | None = None
    reference_n: int | None = None
    reference_gradient_sum: float | None = None
    reference_gradient_square_sum: float | None = None
    reference_curvature_sum: float | None = None
    reference_expected_errors: float | None = None
    reference_ece_estimator: str | None = None
    reference_ece: float | None = None
    reference_ece_low: float | None = None
    reference_ece_high: float | None = None
    reference_confidence_profile: str | None = None
    reference_prior_sums: str | None = None
    refit: RefitProvenance | None = None
    # A prior-corrected version (flows.pipelines.prior_correction): the served posteriors are
    # softmax(z / T) re-weighted by priors / reference_priors; None: served as softmax(z / T).
    prior_correction: PriorCorrection | None = None

    def to_tags(self) -> dict[str, str]:
        """The version's tags: one per field (the refit's as ``refit_*``), plus ``ece_binning``
        in words; absent optional refit fields are not written."""
        tags = {key: value for key, value in _TaggedRecord.to_tags(self).items()
                if key not in ("refit",) and not (key in _OMITTED_WHEN_NONE and value == _NONE)}
        if self.refit is not None:
            tags |= self.refit.to_tags()
        return tags | {"ece_binning": binning_convention(self.ece_n_bins, self.ece_scheme)}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str], *, where: str = "the version") -> VersionRecord:
        """Read a version's tags back into its record.

        Raises
        ------
        ValueError
            If a tag is missing or unreadable; the message names the tag and the version.
        """
        tags = _with_legacy_binning(tags, where)
        values = cls._from_tags({key: value for key, value in tags.items() if key != "refit"}, where)
        values.pop("refit", None)
        refit = (RefitProvenance(**RefitProvenance._from_tags(tags, where))
                 if any(key.startswith("refit_") for key in tags) else None)
        return cls(**values, refit=refit)

    def model_config(self) -> dict[str, Any]:
        """What the calibrated pyfunc reads at load time: T, the gate threshold, the output kind
        and the prior correction (None, or its priors and reference priors as lists)."""
        correction = None if self.prior_correction is None else self.prior_correction.to_dict()
        return {"temperature": self.temperature, "gate_threshold": self.gate_threshold,
                "checkpoint_output": self.checkpoint_output, "prior_correction": correction}

    @classmethod
    def example(cls) -> VersionRecord:
        """A complete record with plausible values (documentation and tests)."""
        return cls(
            temperature=2.5, temperature_bounds=(0.05, 20.0), gate_threshold=0.9, gate_target_accuracy=0.97,
            gate_confidence_level=0.95, gate_coverage=0.8, gate_accepted_accuracy=0.985,
            checkpoint_uri="runs:/r/checkpoint", checkpoint_digest="d" * 64, calibration_data_version="c" * 16,
            calibration_n=450, holdout_data_version="h" * 16, holdout_accuracy=0.95, holdout_metrics_n=450,
            holdout_metrics_split="evaluation part of the holdout (not used to fit T)", holdout_nll_before=0.3,
            holdout_nll_after=0.2, holdout_ece_before=0.04, holdout_ece_after=0.02, nll_reduction="mean",
            bootstrap_nll_change=-0.1, bootstrap_nll_change_low=-0.15, bootstrap_nll_change_high=-0.05,
            bootstrap_confidence_level=0.95, bootstrap_verdict="improved", ece_scheme="equal-width", ece_n_bins=15,
            fitted_at="2026-01-01T00:00:00+00:00", idempotency_key="k" * 64, pipeline_run_id="run",
            train_steps=7, train_data_version="v1", temperature_low=2.3, temperature_high=2.7,
            temperature_confidence_level=0.95, reference_n=450, reference_gradient_sum=0.0,
            reference_gradient_square_sum=120.5, reference_curvature_sum=310.25, reference_expected_errors=22.5,
            reference_ece_estimator="debiased_l1",
            reference_ece=0.012, reference_ece_low=0.0, reference_ece_high=0.03,
        )

    @property
    def reference_stats(self) -> TemperatureStats | None:
        """The reference's temperature sums at the registered T, or None (a legacy version)."""
        sums = (self.reference_n, self.reference_gradient_sum, self.reference_gradient_square_sum,
                self.reference_curvature_sum)
        if any(value is None for value in sums):
            return None
        return TemperatureStats(temperature=self.temperature, n=int(sums[0] or 0), gradient_sum=float(sums[1] or 0.0),
                                gradient_square_sum=float(sums[2] or 0.0), curvature_sum=float(sums[3] or 0.0),
                                # Versions registered before it was stored: unknown (NaN), the test not gated.
                                expected_errors=math.nan if self.reference_expected_errors is None
                                else self.reference_expected_errors)

    @property
    def reference_profile(self) -> ConfidenceProfile | None:
        """The early warning's reference profile, or None (registered before it was stored)."""
        text = self.reference_confidence_profile
        return None if text is None else ConfidenceProfile.from_json(text)

    @property
    def reference_priors(self) -> ReferencePriors | None:
        """The prior test's reference sums at T, or None (registered before they were stored).

        Raises
        ------
        ValueError
            If the tag is not the JSON :func:`encode_reference_priors` writes.
        """
        text = self.reference_prior_sums
        if text is None:
            return None
        return ReferencePriors.from_dict(json_object_tag(text, "tag 'reference_prior_sums'", "reference priors"))

    @property
    def temperature_interval(self) -> tuple[float, float] | None:
        """The registered interval of T, or None (a legacy version)."""
        if self.temperature_low is None or self.temperature_high is None:
            return None
        return self.temperature_low, self.temperature_high

    @property
    def reference_ece_interval(self) -> tuple[float, float] | None:
        """The interval of ``reference_ece``, or None."""
        if self.reference_ece_low is None or self.reference_ece_high is None:
            return None
        return self.reference_ece_low, self.reference_ece_high


def json_object_tag(text: str, where: str, what: str) -> dict[str, Any]:
    """The JSON object a tag holds, or a ValueError naming ``where`` and ``what`` it should hold.

    >>> json_object_tag('{"n": 3}', "tag 't'", "a count")
    {'n': 3}
    >>> json_object_tag("[3]", "tag 't'", "a count")
    Traceback (most recent call last):
    ...
    ValueError: tag 't' is '[3]'; expected a JSON object of a count
    """
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{where} is not JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where} is {text[:80]!r}; expected a JSON object of {what}")
    return data


def reference_priors_may_fit(n_classes: int) -> bool:
    """Whether the sums of :class:`calibration.ReferencePriors` of ``n_classes`` classes could fit in
    the tag :func:`encode_reference_priors` writes: 2 K + 2 K² numbers take at least two characters
    each (a digit and a comma), so above 157 classes they never do, and are not summed at all (their
    K × K sums cost O(n K²) time and O(K²) memory).

    >>> reference_priors_may_fit(157), reference_priors_may_fit(158)
    (True, False)
    """
    return 2 * (2 * n_classes + 2 * n_classes**2) <= _VERSION_TAG_LIMIT


def encode_reference_priors(priors: ReferencePriors | None) -> str | None:
    """The tag ``reference_prior_sums`` of ``priors``: compact JSON, every float to its last digit;
    None when it would not fit in an MLflow tag (K above about 60 classes: 2 K + 2 K² numbers), or
    for None (not summed: :func:`reference_priors_may_fit`).

    >>> import numpy as np
    >>> priors = ReferencePriors.from_logits(np.log([[0.8, 0.2], [0.3, 0.7]]), [0, 1], temperature=1.5)
    >>> text = encode_reference_priors(priors)
    >>> dataclasses.replace(VersionRecord.example(), reference_prior_sums=text).reference_priors.to_dict() == priors.to_dict()
    True
    """
    if priors is None:
        return None
    text = json.dumps(priors.to_dict(), separators=(",", ":"), allow_nan=False)
    return text if len(text) <= _VERSION_TAG_LIMIT else None


# Fields only some versions carry (a refit's, a prior-corrected one's): not written as "none" on
# the others, whose tags stay as they were before these fields existed.
_OMITTED_WHEN_NONE = frozenset({"temperature_before", "holdout_accuracy_source", "prior_correction"})


def _with_legacy_binning(tags: Mapping[str, str], where: str) -> Mapping[str, str]:
    """Tags of a version registered before ``ece_scheme``/``ece_n_bins`` existed: the binning
    was only the sentence of :func:`binning_convention` ("equal-width, 15 bins, ..."), read here
    once, by its fixed layout, into the two fields."""
    if "ece_n_bins" in tags or "ece_binning" not in tags:
        return tags
    parts = tags["ece_binning"].split(", ")
    count = parts[1].split(" ")[0] if len(parts) > 1 else ""
    if not count.isdigit():
        raise ValueError(f"{where}: tag 'ece_binning' is {tags['ece_binning']!r}; expected '<scheme>, <M> bins, ...'")
    return {**tags, "ece_scheme": parts[0], "ece_n_bins": count}


@dataclass(frozen=True, slots=True)
class RegisteredFor:
    """The alias a registration was made for and the version that held it then (None: unset),
    written with the version (tags ``thermostat.alias``, ``thermostat.alias_previous_version``): a
    recovery that removes the version gives the alias back, and the dashboard draws the move
    (MLflow keeps no history of aliases).

    Examples
    --------
    >>> moved = RegisteredFor(alias="champion", previous_version=None)
    >>> moved.to_tags()
    {'thermostat.alias': 'champion', 'thermostat.alias_previous_version': 'none'}
    >>> RegisteredFor.from_tags(moved.to_tags()) == moved, RegisteredFor.from_tags({})
    (True, None)
    """

    alias: str
    previous_version: str | None

    def to_tags(self) -> dict[str, str]:
        return {ALIAS_TAG: self.alias, PREVIOUS_ALIAS_VERSION_TAG: self.previous_version or _NONE}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> RegisteredFor | None:
        """The alias move a version's tags record; None for a version registered without one."""
        alias = tags.get(ALIAS_TAG)
        if alias is None:
            return None
        previous = tags.get(PREVIOUS_ALIAS_VERSION_TAG, _NONE)
        return cls(alias=alias, previous_version=None if previous == _NONE else previous)


@dataclass(frozen=True, slots=True)
class MonitorState:
    """What the monitor keeps on a version between checks, typed both ways (its tags:
    :meth:`to_tags`, :meth:`from_tags`; see the module docstring).

    ``last_drift_event_at`` / ``last_confidence_shift_at`` / ``last_label_shift_at``: when the last
    drift / confidence-shift / label-shift event was emitted (the cool-downs); ``sequential``: the sequential rule's
    state (None: no check of the current window yet); ``insufficient_streak`` / ``undetermined_streak``:
    consecutive ``insufficient_data`` / ``undetermined`` checks of the current window.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> state = MonitorState(last_drift_event_at=datetime(2026, 1, 1, tzinfo=UTC), insufficient_streak=2)
    >>> MonitorState.from_tags(state.to_tags()) == state
    True
    >>> MonitorState(insufficient_streak=3).changed_tags(state)
    {'thermostat.insufficient_data_streak': '3'}
    """

    last_drift_event_at: datetime | None = None
    sequential: SequentialState | None = None
    insufficient_streak: int = 0
    last_confidence_shift_at: datetime | None = None
    last_label_shift_at: datetime | None = None
    undetermined_streak: int = 0

    def to_tags(self) -> dict[str, str]:
        """The state as version tags (an unset time or state: no tag)."""
        tags = {INSUFFICIENT_STREAK_TAG: str(self.insufficient_streak),
                UNDETERMINED_STREAK_TAG: str(self.undetermined_streak)}
        for tag, moment in ((LAST_DRIFT_EVENT_TAG, self.last_drift_event_at),
                            (LAST_CONFIDENCE_SHIFT_TAG, self.last_confidence_shift_at),
                            (LAST_LABEL_SHIFT_TAG, self.last_label_shift_at)):
            if moment is not None:
                tags[tag] = moment.astimezone(UTC).isoformat()
        if self.sequential is not None:
            tags[SEQUENTIAL_STATE_TAG] = self.sequential.to_json()
        return tags

    def changed_tags(self, before: MonitorState) -> dict[str, str]:
        """The tags to write to move a version from ``before`` to this state."""
        old = before.to_tags()
        return {key: value for key, value in self.to_tags().items() if old.get(key) != value}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str], *, where: str = "the version") -> MonitorState:
        """Read the state from a version's tags (absent tags: nothing yet).

        Raises
        ------
        ValueError
            If a state tag is unreadable; the message names the tag and the version.
        """
        streak, undetermined = tags.get(INSUFFICIENT_STREAK_TAG, "0"), tags.get(UNDETERMINED_STREAK_TAG, "0")
        for tag, count in ((INSUFFICIENT_STREAK_TAG, streak), (UNDETERMINED_STREAK_TAG, undetermined)):
            if not count.isdigit():
                raise ValueError(f"{where}: tag {tag!r} is {count!r}; expected a count >= 0")
        text = tags.get(SEQUENTIAL_STATE_TAG)
        try:
            sequential = None if text is None else SequentialState.from_json(text)
        except ValueError as error:
            raise ValueError(f"{where}: tag {SEQUENTIAL_STATE_TAG!r}: {error}") from error
        def moment(tag: str) -> datetime | None:
            text = tags.get(tag)
            return None if text is None else aware_time(text, where, tag)

        return cls(last_drift_event_at=moment(LAST_DRIFT_EVENT_TAG), sequential=sequential,
                   insufficient_streak=int(streak), last_confidence_shift_at=moment(LAST_CONFIDENCE_SHIFT_TAG),
                   last_label_shift_at=moment(LAST_LABEL_SHIFT_TAG), undetermined_streak=int(undetermined))


_Read = typing.TypeVar("_Read")


class _FromRecord(ReadThrough[VersionRecord, _Read]):
    """An attribute of a :class:`RegisteredVersion` that its record holds."""

    PART = "record"


@dataclass(frozen=True, slots=True)
class RegisteredVersion:
    """One registered version of a model: its record, the aliases that point at it (sorted,
    champion first) and the monitor's state kept on it (:class:`MonitorState`)."""

    model_name: str
    version: str
    aliases: tuple[str, ...]
    record: VersionRecord
    monitor: MonitorState = MonitorState()
    registered_for: RegisteredFor | None = None
    """The alias its registration moved and who held it (None: registered without one)."""

    @property
    def last_drift_event_at(self) -> datetime | None:
        """When the last drift event of this version was emitted (the cool-down), or None."""
        return self.monitor.last_drift_event_at

    # What the record holds, read through the version: ``version.temperature`` is ``version.record.temperature``.
    # What a check reads the traffic at:
    temperature = _FromRecord(lambda record: record.temperature)
    """The registered T: every check reads the version's traffic at it."""
    gate_threshold = _FromRecord(lambda record: record.gate_threshold)
    temperature_interval = _FromRecord(lambda record: record.temperature_interval)
    n_bins = _FromRecord(lambda record: record.ece_n_bins)
    """The ECE binning registered with the version (``ece_n_bins``): its checks bin the same way."""
    baseline_ece = _FromRecord(lambda record: record.holdout_ece_after)
    """The registration baseline: the ECE after calibration on the held-out evaluation part."""
    # What the traffic is compared with:
    reference_stats = _FromRecord(lambda record: record.reference_stats)
    reference_profile = _FromRecord(lambda record: record.reference_profile)
    reference_priors = _FromRecord(lambda record: record.reference_priors)
    """The class counts and posterior sums the shift diagnosis compares the served rows with."""

    @property
    def drift_reference(self) -> DriftReference:
        """What the drift decision compares this version's traffic with: the reference's temperature
        sums, its ECE with interval, estimator and binning, and the baseline NLL.

        A version registered before the reference ECE was stored has only its binned holdout ECE:
        it is declared as such (estimator ``binned``), so the ECE test refuses to compare it with
        the monitor's estimator instead of comparing two different quantities.
        """
        record = self.record
        legacy = record.reference_ece is None
        return DriftReference.of(
            record.holdout_ece_after if record.reference_ece is None else record.reference_ece,
            ece_interval=None if legacy else record.reference_ece_interval,
            ece_estimator="binned" if legacy else record.reference_ece_estimator or "unknown",
            n_bins=record.ece_n_bins, temperature_stats=record.reference_stats, nll=record.holdout_nll_after,
        )

    @property
    def alias(self) -> str:
        """The alias a refit of this version moves (the first: ``champion`` when it is one)."""
        return self.aliases[0] if self.aliases else ""

    @property
    def context(self) -> str:
        return version_context(self.model_name, self.version, self.aliases, self.checkpoint_uri, self.temperature)

    # Which checkpoint, trained how:
    checkpoint_uri = _FromRecord(lambda record: record.checkpoint_uri)
    checkpoint_digest = _FromRecord(lambda record: record.checkpoint_digest)
    """The digest of the checkpoint's files when registered: a refit refuses files that differ."""
    checkpoint_output = _FromRecord(lambda record: record.checkpoint_output)
    train_steps = _FromRecord(lambda record: record.train_steps)
    train_data_version = _FromRecord(lambda record: record.train_data_version)


def version_context(
    model_name: str, version: str, aliases: Sequence[str], checkpoint_uri: str, temperature: float | None
) -> str:
    """The prefix of every monitor/refit log line: which version, served under which aliases,
    which checkpoint, which T.

    Examples
    --------
    >>> version_context("digits", "3", ["champion"], "runs:/abc/checkpoint", 2.5)
    '[digits v3 @champion checkpoint=runs:/abc/checkpoint T=2.5]'
    """
    shown = "pending" if temperature is None else f"{temperature:.6g}"
    served = " ".join(f"@{alias}" for alias in aliases)
    return f"[{model_name} v{version}{' ' + served if served else ''} checkpoint={checkpoint_uri} T={shown}]"


def aware_time(value: str, where: str, tag: str) -> datetime:
    """The time an ISO 8601 tag holds, in UTC (a time without a zone is read as UTC); a ValueError
    naming ``where`` and the tag when it is not one.

    >>> aware_time("2026-01-01T01:00:00+01:00", "digits version 1", "t").isoformat()
    '2026-01-01T00:00:00+00:00'
    """
    try:
        moment = datetime.fromisoformat(value)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError) as error:
        raise ValueError(f"{where}: tag {tag!r} is {value!r}; expected an ISO 8601 time") from error


def registered_version(
    model_name: str, version: str, tags: Mapping[str, str], aliases: Sequence[str] = ()
) -> RegisteredVersion:
    """Read a version's tags: its :class:`VersionRecord` and its :class:`MonitorState`.

    Raises
    ------
    ValueError
        If a tag the record needs is missing or unreadable (a version not registered by
        Thermostat cannot be monitored against a baseline it does not have), or T is not a
        finite T > 0.

    Examples
    --------
    >>> tags = VersionRecord.example().to_tags()
    >>> v = registered_version("digits", "1", tags, ["challenger", "champion"])
    >>> v.aliases, v.temperature, v.gate_threshold, v.n_bins, v.last_drift_event_at
    (('champion', 'challenger'), 2.5, 0.9, 15, None)
    """
    where = f"{model_name} version {version}"
    record = VersionRecord.from_tags(tags, where=where)
    if not (math.isfinite(record.temperature) and record.temperature > 0):
        raise ValueError(f"{where}: tag 'temperature' is {tags['temperature']!r}; expected a finite T > 0")
    ordered = sorted(aliases, key=lambda alias: (alias != "champion", alias))
    return RegisteredVersion(model_name=model_name, version=str(version), aliases=tuple(ordered), record=record,
                             monitor=MonitorState.from_tags(tags, where=where),
                             registered_for=RegisteredFor.from_tags(tags))


def registered_by_thermostat(tags: Mapping[str, str]) -> bool:
    """Whether a version's tags say Thermostat registered it (its ``temperature`` or its
    registration state): a version that does not is another tool's, never checked or alerted on;
    one that does but whose record cannot be read (:func:`registered_version` refuses it) is a
    version the monitor must check and cannot.

    Examples
    --------
    >>> registered_by_thermostat({"team": "x"}), registered_by_thermostat({REGISTRATION_TAG: "complete"})
    (False, True)
    """
    return "temperature" in tags or REGISTRATION_TAG in tags


def serving_versions(aliases: Mapping[str, str], wanted: Sequence[str] | None = None) -> dict[str, tuple[str, ...]]:
    """Group serving aliases by the version they point at: {version: (aliases...)}.

    ``wanted`` restricts to those aliases (an alias that does not exist is an error: a typo
    would otherwise look like a quiet model forever).

    Examples
    --------
    >>> serving_versions({"champion": "3", "challenger": "2", "shadow": "3"})
    {'2': ('challenger',), '3': ('champion', 'shadow')}
    >>> serving_versions({"champion": "3"}, ["canary"])
    Traceback (most recent call last):
    ...
    ValueError: alias(es) ['canary'] do not exist; the model's aliases are ['champion']
    """
    if wanted is not None:
        unknown = sorted(set(wanted) - set(aliases))
        if unknown:
            raise ValueError(f"alias(es) {unknown} do not exist; the model's aliases are {sorted(aliases)}")
        aliases = {alias: aliases[alias] for alias in wanted}
    grouped: dict[str, list[str]] = {}
    for alias, version in aliases.items():
        grouped.setdefault(version, []).append(alias)
    return {
        version: tuple(sorted(names, key=lambda alias: (alias != "champion", alias)))
        for version, names in sorted(grouped.items(), key=lambda item: int(item[0]) if item[0].isdigit() else 0)
    }
