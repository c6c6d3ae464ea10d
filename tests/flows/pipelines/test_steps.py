"""The typed order of the post-finetune steps, and the refusals (untrusted fits, unqualified data)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from calibration import ReferencePriors, ScoredSet
from flows.records.versions import encode_reference_priors
from flows.settings import ThermostatSettings
from flows.pipelines.steps import (
    AcceptedCheckpoint,
    ChampionScore,
    DigestMismatchError,
    GatedCheckpoint,
    StepRefused,
    accept_checkpoint,
    data_version,
    gate_threshold,
    idempotency_key,
    refit_temperature,
    verify_chain,
)

from tests.flows.synthetic import overconfident_set

TRAINING_IDS = np.array([f"t-{i}" for i in range(50)])


def _accept(holdout: ScoredSet, settings: ThermostatSettings, *, digest: str = "a" * 64,
            training_ids: np.ndarray = TRAINING_IDS, champion: ChampionScore | None = None) -> AcceptedCheckpoint:
    return accept_checkpoint(
        checkpoint_uri=f"runs:/{digest[:6]}/checkpoint", checkpoint_digest=digest, checkpoint_output="logits",
        holdout=holdout, training_ids=training_ids, champion=champion, train_steps=10, train_data_version="v1",
        settings=settings,
    )


def _gated(holdout: ScoredSet, settings: ThermostatSettings, digest: str = "a" * 64) -> GatedCheckpoint:
    return gate_threshold(refit_temperature(_accept(holdout, settings, digest=digest), settings=settings),
                          settings=settings)


def test_steps_chain_carries_one_digest_and_fits_an_overconfident_model(settings: ThermostatSettings) -> None:
    gated = _gated(overconfident_set(), settings)
    assert gated.checkpoint_digest == gated.calibrated.checkpoint_digest == gated.accepted.checkpoint_digest
    assert 2.0 < gated.temperature < 4.5  # generated with T = 3
    calibrated = gated.calibrated
    assert set(calibrated.calibration_ids).isdisjoint(calibrated.evaluation_ids)
    assert len(calibrated.calibration_ids) + len(calibrated.evaluation_ids) == gated.accepted.holdout.n_samples
    assert calibrated.calibration_data_version == data_version(calibrated.calibration_ids)
    assert gated.after.n == len(calibrated.evaluation_ids)
    assert gated.after.nll < gated.before.nll
    verify_chain(gated, checkpoint_digest="a" * 64)


def test_split_is_seeded_and_stratified(settings: ThermostatSettings) -> None:
    holdout = overconfident_set()
    first = refit_temperature(_accept(holdout, settings), settings=settings)
    again = refit_temperature(_accept(holdout, settings), settings=settings)
    assert first.calibration_ids.tolist() == again.calibration_ids.tolist()
    calibration_labels = holdout.labels[np.isin(holdout.ids, first.calibration_ids)]
    share = np.bincount(calibration_labels, minlength=4) / np.bincount(holdout.labels, minlength=4)
    assert np.allclose(share, settings.calibration_fraction, atol=0.02)
    # The shift diagnosis's reference: the calibration part's class counts and posteriors at its T.
    part = np.isin(holdout.ids, first.calibration_ids)
    assert first.reference_priors.temperature == first.temperature
    assert first.reference_priors.class_counts.tolist() == np.bincount(calibration_labels, minlength=4).tolist()
    expected = ReferencePriors.from_logits(holdout.logits[part], holdout.labels[part], temperature=first.temperature)
    assert np.allclose(first.reference_priors.posterior_sum, expected.posterior_sum, rtol=1e-12)


def test_reference_priors_too_large_for_their_tag_are_not_summed(settings: ThermostatSettings) -> None:
    # Their 2 K + 2 K² numbers never fit a tag above 157 classes, so their K × K sums (O(n K²) time,
    # O(K²) memory: 74.5 GiB for the confusion's bincount at K = 100,000) are not formed at all.
    rng = np.random.default_rng(3)
    k, n = 200, 2_000
    labels = np.concatenate([np.arange(k), rng.integers(0, k, n - k)])
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += 4.0
    holdout = ScoredSet.from_arrays(logits, labels, ids=[f"h-{i}" for i in range(n)])
    calibrated = refit_temperature(_accept(holdout, settings),
                                   settings=settings.model_copy(update={"min_per_class": 1, "min_total": 100}))
    assert calibrated.reference_priors is None and encode_reference_priors(calibrated.reference_priors) is None


def test_gate_result_built_on_another_checkpoints_fit_is_refused(settings: ThermostatSettings) -> None:
    gated_a = _gated(overconfident_set(seed=0), settings, digest="a" * 64)
    calibrated_b = refit_temperature(_accept(overconfident_set(seed=1), settings, digest="b" * 64), settings=settings)
    forged = dataclasses.replace(gated_a, calibrated=calibrated_b)
    with pytest.raises(DigestMismatchError, match="temperature fit was computed on bbbbbbbbbbbb"):
        verify_chain(forged, checkpoint_digest="a" * 64)
    with pytest.raises(DigestMismatchError, match="has digest cccccccccccc"):
        verify_chain(gated_a, checkpoint_digest="c" * 64)


def test_acceptance_refuses_id_overlap_with_count_and_examples(settings: ThermostatSettings) -> None:
    holdout = overconfident_set()
    leaked = np.concatenate([TRAINING_IDS, holdout.ids[:7]])
    with pytest.raises(StepRefused, match=r"acceptance refused: 7 holdout id\(s\) are also training ids \(e\.g\. 'h-0'"):
        _accept(holdout, settings, training_ids=leaked)


def test_acceptance_refuses_accuracy_floor_and_champion_regression(settings: ThermostatSettings) -> None:
    holdout = overconfident_set()
    accuracy = float(np.mean(holdout.logits.argmax(axis=1) == holdout.labels))
    with pytest.raises(StepRefused, match="below the floor"):
        _accept(holdout, settings.model_copy(update={"min_accuracy": accuracy + 0.01}))
    with pytest.raises(StepRefused, match="below the current holder"):
        _accept(holdout, settings, champion=ChampionScore("3", accuracy + 0.05))
    assert _accept(holdout, settings, champion=ChampionScore("3", accuracy + 0.005)).champion is not None


def test_acceptance_refuses_a_missing_class(settings: ThermostatSettings) -> None:
    holdout = overconfident_set()
    no_class_3 = holdout.subset(np.flatnonzero(holdout.labels != 3))
    with pytest.raises(StepRefused, match=r"no example of class\(es\) \[3\]"):
        _accept(no_class_3, settings)


def test_refit_refuses_a_fit_on_the_lower_bound(settings: ThermostatSettings) -> None:
    # A small calibration part with no errors drives T to the lower bound.
    holdout = overconfident_set(n=400)
    correct = holdout.subset(np.flatnonzero(holdout.logits.argmax(axis=1) == holdout.labels)[:60])
    small = settings.model_copy(update={"min_total": 10, "min_per_class": 2, "max_tv_distance": 1.0})
    with pytest.raises(StepRefused, match="lower bound.*no errors"):
        refit_temperature(_accept(correct, small), settings=small)


def test_refit_refuses_an_unqualified_calibration_part(settings: ThermostatSettings) -> None:
    with pytest.raises(StepRefused, match="does not qualify"):
        refit_temperature(_accept(overconfident_set(n=200), settings), settings=settings)


def test_idempotency_key_follows_checkpoint_data_and_settings(settings: ThermostatSettings) -> None:
    holdout = overconfident_set()
    gated = _gated(holdout, settings)
    assert idempotency_key(gated, settings) == idempotency_key(_gated(holdout, settings), settings)
    assert idempotency_key(gated, settings) != idempotency_key(_gated(holdout, settings, digest="b" * 64), settings)
    other = settings.model_copy(update={"gate_target_accuracy": 0.7})
    assert idempotency_key(gated, settings) != idempotency_key(gated, other)


def test_register_takes_only_a_gate_result(settings: ThermostatSettings, tmp_path: Path) -> None:
    from flows.registry.checkpoint import CheckpointFiles
    from flows.pipelines.registration import register

    calibrated = refit_temperature(_accept(overconfident_set(), settings), settings=settings)
    files = CheckpointFiles("runs:/x", tmp_path, "a" * 64)
    with pytest.raises(TypeError, match="GatedCheckpoint"):  # refused before any I/O, so no registry
        register(calibrated, files, registry=None, model_name="m", alias="champion",  # type: ignore[arg-type]
                 settings=settings)
