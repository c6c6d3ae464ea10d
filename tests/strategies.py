"""Hypothesis strategies shared by the property tests."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.typing import NDArray

# Logits on a 1/8 grid: exact ties stay exact, and distinct logits stay distinguishable
# after softmax at any T in the bounds (a 1e-150 difference vanishes in exp, by float law).
finite_logit = st.integers(-240, 240).map(lambda step: step / 8.0)
row_shift = st.integers(-800, 800).map(lambda step: step / 8.0)
positive_temperature = st.floats(min_value=0.05, max_value=20.0, allow_nan=False, allow_infinity=False)


@st.composite
def scored_arrays(
    draw: st.DrawFn, min_rows: int = 1, max_rows: int = 60, min_classes: int = 2, max_classes: int = 6
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """(logits, labels) with at least one error and one hit, so the fitted T is interior-ish."""
    n_rows = draw(st.integers(min_rows, max_rows))
    n_classes = draw(st.integers(min_classes, max_classes))
    logits = draw(hnp.arrays(np.float64, (n_rows, n_classes), elements=finite_logit))
    labels = draw(hnp.arrays(np.intp, n_rows, elements=st.integers(0, n_classes - 1)))
    return logits, labels


@st.composite
def fittable_arrays(draw: st.DrawFn) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Logits from a seeded generator whose labels follow softmax(z / true T): a real optimum."""
    seed = draw(st.integers(0, 2**32 - 1))
    n_rows = draw(st.integers(40, 400))
    n_classes = draw(st.integers(3, 8))
    true_temperature = draw(st.floats(0.5, 4.0))
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=3.0, size=(n_rows, n_classes))
    labels = sample_labels(rng, logits / true_temperature)
    return logits, labels


def sample_labels(rng: np.random.Generator, logits: NDArray[Any]) -> NDArray[np.intp]:
    """Draw one label per row from softmax(logits)."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    uniform = rng.random((logits.shape[0], 1))
    labels = (probabilities.cumsum(axis=1) < uniform).sum(axis=1)
    return np.minimum(labels, logits.shape[1] - 1).astype(np.intp)

# Generated credentials: letters and digits with the characters that end a URL's parts
# ("/", "?", "#"), separate its credentials ("@", ":"), or are percent-escapes ("%").
RESERVED_IN_URLS = "/?#@:%&;=+!$'()*,[] "
generated_password = st.text(
    alphabet=st.sampled_from("abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789" + RESERVED_IN_URLS),
    min_size=8, max_size=32,
).filter(lambda password: any(c in RESERVED_IN_URLS for c in password))
