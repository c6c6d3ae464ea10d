"""The prior correction's verification rule, on arrays: a correction must lower the NLL of the
newer labelled rows; taking one off (the mix is back at the reference's) must only not raise it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from calibration import PriorCorrection, ScoredSet
from flows.pipelines.prior_correction import verify_correction
from flows.records.versions import VersionRecord, registered_version
from flows.settings import ThermostatSettings


def _traffic(n: int, seed: int) -> ScoredSet:
    """Rows whose labels are drawn from softmax(z): the uncorrected model is calibrated on them."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=2.0, size=(n, 3))
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    labels = (rng.random(n)[:, None] > np.cumsum(probabilities, axis=1)).sum(axis=1)
    return ScoredSet.from_arrays(logits, labels)


def _resampled(scored: ScoredSet, chosen: int, share: float) -> ScoredSet:
    """``scored``'s rows drawn again so that class ``chosen`` is ``share`` of them (a label shift)."""
    labels = scored.labels
    weights = np.where(labels == chosen, share / np.mean(labels == chosen), (1 - share) / np.mean(labels != chosen))
    rows = np.random.default_rng(2).choice(labels.shape[0], size=labels.shape[0], p=weights / weights.sum())
    return ScoredSet.from_arrays(scored.logits[rows], labels[rows])


def test_an_undo_needs_no_significant_gain_but_a_correction_does() -> None:
    settings = ThermostatSettings(min_total=100, bootstrap_resamples=300)
    barely = PriorCorrection([0.34, 0.33, 0.33], [1 / 3, 1 / 3, 1 / 3])  # next to the identity
    record = replace(VersionRecord.example(), temperature=1.0, prior_correction=barely)
    corrected = registered_version("m", "2", record.to_tags(), ["champion"])
    traffic = _traffic(4_000, seed=1)
    undo = verify_correction(traffic, corrected, None, settings)
    assert undo.confirmed and undo.bootstrap is not None and undo.bootstrap.verdict == "not established"
    assert undo.passed, "removing a correction the traffic no longer needs must not wait for a significant gain"
    plain = registered_version("m", "1", replace(record, prior_correction=None).to_tags(), ["champion"])
    again = verify_correction(traffic, plain, barely, settings)
    assert again.bootstrap is not None and again.bootstrap.verdict == "not established" and not again.passed
    # An undo the labelled rows contradict (the correction was doing good) is refused.
    strong = PriorCorrection([0.8, 0.1, 0.1], [1 / 3, 1 / 3, 1 / 3])
    skewed = _resampled(traffic, 0, 0.8)
    helped = registered_version("m", "3", replace(record, prior_correction=strong).to_tags(), ["champion"])
    assert not verify_correction(skewed, helped, None, settings).passed
