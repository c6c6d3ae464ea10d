"""A registered version as the monitor and the refit read it: T, gate, baseline, checkpoint.

Everything comes from the version's tags (written once, at registration, by
:func:`flows.reports.version_tags`), plus one piece of monitoring metadata:
``thermostat.last_drift_event_at``, the time of the last drift *event* emitted for the version
(the cool-down state: one drift does not start a storm of refits). That tag is the only one Thermostat ever writes after
registration; T, the threshold and the evidence are never changed.

No MLflow here: the flows read the tags through :class:`flows.registry.MlflowRegistry` and
pass them in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

__all__ = [
    "LAST_DRIFT_EVENT_TAG",
    "CheckpointOutput",
    "RegisteredVersion",
    "registered_version",
    "serving_versions",
    "version_context",
]

LAST_DRIFT_EVENT_TAG = "thermostat.last_drift_event_at"

CheckpointOutput = Literal["logits", "probabilities"]
"""What a checkpoint's ``predict`` returns; probabilities are turned into logits by their log."""

_REQUIRED = ("temperature", "gate_threshold", "checkpoint_uri", "checkpoint_digest", "holdout_ece_after", "ece_binning")
_BINS = re.compile(r"(\d+) bins")


@dataclass(frozen=True, slots=True)
class RegisteredVersion:
    """One registered version of a model, and the aliases that point at it (sorted, champion first)."""

    model_name: str
    version: str
    aliases: tuple[str, ...]
    temperature: float
    gate_threshold: float | None
    checkpoint_uri: str
    checkpoint_digest: str
    checkpoint_output: CheckpointOutput
    baseline_ece: float
    baseline_nll: float | None
    n_bins: int
    train_steps: int
    train_data_version: str
    last_drift_event_at: datetime | None

    @property
    def alias(self) -> str:
        """The alias a refit of this version moves (the first: ``champion`` when it is one)."""
        return self.aliases[0] if self.aliases else ""

    @property
    def context(self) -> str:
        return version_context(self.model_name, self.version, self.aliases, self.checkpoint_uri, self.temperature)


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


def _float(tags: Mapping[str, str], key: str, where: str) -> float:
    try:
        value = float(tags[key])
    except ValueError as error:
        raise ValueError(f"{where}: tag {key!r} is {tags[key]!r}; expected a number") from error
    return value


def _aware(value: str, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as error:
        raise ValueError(f"{where}: tag {LAST_DRIFT_EVENT_TAG!r} is {value!r}; expected an ISO 8601 time") from error
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def registered_version(
    model_name: str, version: str, tags: Mapping[str, str], aliases: Sequence[str] = ()
) -> RegisteredVersion:
    """Read a version's registration tags.

    Raises
    ------
    ValueError
        If a tag the monitor needs is missing or unreadable (a version not registered by
        Thermostat cannot be monitored against a baseline it does not have).

    Examples
    --------
    >>> tags = {"temperature": "2.5", "gate_threshold": "none", "checkpoint_uri": "runs:/r/checkpoint",
    ...         "checkpoint_digest": "ab", "holdout_ece_after": "0.02", "holdout_nll_after": "0.3",
    ...         "ece_binning": "equal-width, 15 bins, top-label confidence", "checkpoint_output": "logits"}
    >>> v = registered_version("digits", "1", tags, ["challenger", "champion"])
    >>> v.aliases, v.temperature, v.gate_threshold, v.n_bins, v.last_drift_event_at
    (('champion', 'challenger'), 2.5, None, 15, None)
    """
    where = f"{model_name} version {version}"
    missing = [key for key in _REQUIRED if key not in tags]
    if missing:
        raise ValueError(
            f"{where} lacks the registration tag(s) {missing}; only versions registered by Thermostat's "
            "post-finetune or refit flows carry the T, gate and baseline a check needs"
        )
    temperature = _float(tags, "temperature", where)
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"{where}: tag 'temperature' is {tags['temperature']!r}; expected a finite T > 0")
    threshold = None if tags["gate_threshold"] == "none" else _float(tags, "gate_threshold", where)
    bins = _BINS.search(tags["ece_binning"])
    if bins is None:
        raise ValueError(f"{where}: tag 'ece_binning' is {tags['ece_binning']!r}; expected '<scheme>, <M> bins, ...'")
    nll = tags.get("holdout_nll_after")
    output = tags.get("checkpoint_output", "logits")
    if output not in ("logits", "probabilities"):
        raise ValueError(f"{where}: tag 'checkpoint_output' is {output!r}; expected 'logits' or 'probabilities'")
    last = tags.get(LAST_DRIFT_EVENT_TAG)
    ordered = sorted(aliases, key=lambda alias: (alias != "champion", alias))
    return RegisteredVersion(
        model_name=model_name,
        version=str(version),
        aliases=tuple(ordered),
        temperature=temperature,
        gate_threshold=threshold,
        checkpoint_uri=tags["checkpoint_uri"],
        checkpoint_digest=tags["checkpoint_digest"],
        checkpoint_output="probabilities" if output == "probabilities" else "logits",
        baseline_ece=_float(tags, "holdout_ece_after", where),
        baseline_nll=None if nll in (None, "none") else _float(tags, "holdout_nll_after", where),
        n_bins=int(bins.group(1)),
        train_steps=int(tags.get("train_steps", "0")),
        train_data_version=tags.get("train_data_version", "unknown"),
        last_drift_event_at=None if last is None else _aware(last, where),
    )


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
