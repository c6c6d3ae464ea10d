"""Cross-checks on real CIFAR classifier outputs against peers and the folder's README."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import log_loss

from calibration import CalibrationStats, _fit, _kernels, evaluate, fit_temperature

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


# What the compiled kernels gave before the vectorised exp (main at 495e97b, whose kernels date
# from 463a28a): fit_temperature's T, nll_before and nll_after, then ECE and NLL (15 bins) at
# T = 1 and at that T, every pass through the compiled kernels.
RECORDED_BEFORE_THE_VECTOR_EXP = {
    "cifar100_densenet-bc-100_netcal": (2.117609486222731, 1.225626917999772, 0.8766138103217205, 0.14215281575087793, 1.2256269179997716, 0.012040993923151276, 0.8766138103216968),
    "cifar100_lenet5_netcal": (1.1181569024640516, 3.8130655994630485, 3.8040066502619467, 0.014878473427449902, 3.8130655994630493, 0.009784198135146948, 3.8040066502619463),
    "cifar100_wrn16-4_netcal": (1.1111457697732443, 0.9564492136586934, 0.9474552434026893, 0.05806039162840245, 0.9564492136586936, 0.041837674605522866, 0.9474552434026897),
    "cifar10_lenet5_netcal": (1.396778987356282, 1.3698677282836653, 1.3114974374606119, 0.10788788182459548, 1.3698677282836667, 0.012963144586614767, 1.3114974374620554),
    "cifar10_vgg16_verified_calibration": (1.6863090109222452, 0.2570648037721222, 0.2005743704220482, 0.03978006947668146, 0.2570648037721224, 0.014101200594722568, 0.200574370422048),
    "cifar10_wrn16-4_netcal": (2.052548799361378, 0.3781695909714269, 0.27448696790851534, 0.053716290179975486, 0.3781695909714273, 0.006152487103800471, 0.2744869679087302),
}


@pytest.mark.parametrize("name", sorted(RECORDED_BEFORE_THE_VECTOR_EXP))
def test_the_compiled_kernels_give_the_recorded_temperature_and_metrics(
    real_logits_dir: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every pass through the compiled kernels, whatever its size (by default the 10-class files
    # and the warm start's samples are small enough for numpy).
    def always(kernel: str, n_elements: int, dtype: np.dtype[Any]) -> bool:
        return True

    monkeypatch.setattr(_kernels, "compiled_path", always)
    monkeypatch.setattr(_fit, "compiled_path", always)
    logits, labels = _load(real_logits_dir, name)
    temperature, nll_before, nll_after, ece_one, nll_one, ece_fitted, nll_fitted = RECORDED_BEFORE_THE_VECTOR_EXP[name]
    fit = fit_temperature(logits, labels)
    assert fit.temperature == pytest.approx(temperature, rel=1e-9)
    assert [fit.nll_before, fit.nll_after] == pytest.approx([nll_before, nll_after], rel=1e-12)
    at_one = CalibrationStats.from_logits(logits, labels, temperature=1.0, n_bins=15)
    fitted = CalibrationStats.from_logits(logits, labels, temperature=fit.temperature, n_bins=15)
    assert [at_one.ece, at_one.nll] == pytest.approx([ece_one, nll_one], rel=1e-12)
    assert [fitted.ece, fitted.nll] == pytest.approx([ece_fitted, nll_fitted], rel=1e-12)
