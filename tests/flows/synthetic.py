"""Synthetic scored sets with a known temperature."""

from __future__ import annotations

import numpy as np

from calibration import ScoredSet


def overconfident_set(*, n: int = 900, n_classes: int = 4, sharpness: float = 3.0, seed: int = 0,
                      prefix: str = "h") -> ScoredSet:
    """Labels drawn from softmax(z); the model reports sharpness * z, so the true T is ``sharpness``."""
    rng = np.random.default_rng(seed)
    true_logits = rng.normal(scale=1.5, size=(n, n_classes))
    probabilities = np.exp(true_logits - true_logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    labels = (probabilities.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return ScoredSet.from_arrays(sharpness * true_logits, labels, ids=[f"{prefix}-{i}" for i in range(n)])


def tempered_traffic(n: int, rng: np.random.Generator, *, n_classes: int = 10, scale: float = 4.0,
                     true_temperature: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Logits z; labels drawn from softmax(z / true_temperature): a pure 'volume' miscalibration
    that one temperature (true_temperature) fixes."""
    logits = scale * rng.normal(size=(n, n_classes))
    probabilities = np.exp((logits - logits.max(axis=1, keepdims=True)) / true_temperature)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    labels = (probabilities.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return logits, labels


def arched_traffic(n: int, rng: np.random.Generator, *, n_classes: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence c uniform in [0.12, 1); accuracy 0.55 + 0.4 sin(pi c): under-confident in
    the middle, over-confident at the top — an arched reliability curve no single T fixes."""
    confidence = rng.uniform(0.12, 1.0, n)
    top = rng.integers(0, n_classes, n)
    logits = np.tile(np.log((1.0 - confidence + 1e-9) / (n_classes - 1))[:, None], (1, n_classes))
    logits[np.arange(n), top] = np.log(confidence)
    correct = rng.random(n) < 0.55 + 0.4 * np.sin(np.pi * confidence)
    other = (top + rng.integers(1, n_classes, n)) % n_classes
    return logits, np.where(correct, top, other)
