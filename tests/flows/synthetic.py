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
