"""Cross-checks on real CIFAR classifier outputs against peers and the folder's README."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import log_loss

from calibration import evaluate, fit_temperature

# From tests/data/real-logits/README.md: accuracy, ECE (15 equal-width bins), NLL, oracle T.
README_TABLE = {
    "cifar10_wrn16-4_netcal": (0.9109, 0.05372, 0.3782, 2.0525),
    "cifar10_lenet5_netcal": (0.5308, 0.10789, 1.3699, 1.3968),
    "cifar100_wrn16-4_netcal": (0.7543, 0.05806, 0.9564, 1.1111),
    "cifar100_densenet-bc-100_netcal": (0.7541, 0.14215, 1.2256, 2.1176),
    "cifar100_lenet5_netcal": (0.1246, 0.01488, 3.8131, 1.1182),
    "cifar10_vgg16_verified_calibration": (0.9359, 0.03978, 0.2571, 1.6863),
}


class _FrozenLogits(ClassifierMixin, BaseEstimator):
    """Passes the logits through, so scikit-learn calibrates exactly these numbers."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> _FrozenLogits:
        self.classes_ = np.unique(y)
        return self

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return X

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.classes_[X.argmax(axis=1)]


def _load(folder: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(folder / f"{name}.npz")
    return data["logits"], data["labels"]


@pytest.mark.parametrize("name", sorted(README_TABLE))
def test_metrics_at_t1_match_the_readme(real_logits_dir: Path, name: str) -> None:
    logits, labels = _load(real_logits_dir, name)
    accuracy, ece, nll, _ = README_TABLE[name]
    report = evaluate(logits, labels, n_bins=15)
    assert report.accuracy == pytest.approx(accuracy, abs=5e-5)
    assert report.ece == pytest.approx(ece, abs=5e-6)
    assert report.nll == pytest.approx(nll, abs=5e-5)


@pytest.mark.parametrize("name", sorted(README_TABLE))
def test_temperature_matches_scikit_learn_and_the_readme(real_logits_dir: Path, name: str) -> None:
    logits, labels = _load(real_logits_dir, name)
    fit = fit_temperature(logits, labels)
    # scikit-learn fits in the input's dtype: give it float64 so both aim at one optimum.
    z = logits.astype(np.float64)
    peer = CalibratedClassifierCV(FrozenEstimator(_FrozenLogits().fit(z, labels)), method="temperature").fit(z, labels)
    peer_temperature = 1.0 / peer.calibrated_classifiers_[0].calibrators[0].beta_
    assert fit.temperature == pytest.approx(peer_temperature, rel=1e-4)
    assert fit.temperature == pytest.approx(README_TABLE[name][3], abs=1e-4)  # README rounds to 4 places
    assert fit.at_bound is None and fit.nll_after < fit.nll_before


def test_nll_matches_scikit_learn_log_loss(real_logits_dir: Path) -> None:
    logits, labels = _load(real_logits_dir, "cifar10_vgg16_verified_calibration")
    probabilities = np.exp(logits.astype(np.float64))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    assert evaluate(logits, labels).nll == pytest.approx(log_loss(labels, probabilities, labels=range(10)), rel=1e-9)
