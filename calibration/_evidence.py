"""Evidence: paired bootstrap of the NLL change, consistency resampling of ECE (rules 5, 10).

STUB: signatures fixed; implementation pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from numpy.typing import ArrayLike

__all__ = ["BootstrapComparison", "ConsistencyTest", "paired_bootstrap_nll", "consistency_resampling_test"]

Verdict = Literal["improved", "worse", "not established"]


@dataclass(frozen=True, slots=True)
class BootstrapComparison:
    """Paired bootstrap of the per-example NLL difference (after - before), mean nats.

    ``verdict`` is "improved" when the whole interval is < 0, "worse" when > 0,
    "not established" when it spans 0.
    """

    estimate: float
    low: float
    high: float
    verdict: Verdict
    temperature_before: float
    temperature_after: float
    n: int
    n_resamples: int
    confidence_level: float
    seed: int


@dataclass(frozen=True, slots=True)
class ConsistencyTest:
    """Consistency resampling (Vaicenavicius et al. 2019) of the ECE at one temperature.

    ``p_value`` is the share of resampled ECEs (labels drawn from the model's own
    probabilities) that are >= ``observed_ece``, with the +1 correction:
    (1 + #{null >= observed}) / (1 + n_resamples).
    """

    observed_ece: float
    p_value: float
    null_mean: float
    null_quantile_95: float
    n: int
    n_bins: int
    scheme: str
    n_resamples: int
    seed: int


def paired_bootstrap_nll(
    logits: ArrayLike,
    labels: ArrayLike,
    *,
    temperature_before: float,
    temperature_after: float,
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> BootstrapComparison:
    raise NotImplementedError


def consistency_resampling_test(
    logits: ArrayLike,
    labels: ArrayLike,
    *,
    temperature: float = 1.0,
    n_bins: int = 15,
    n_resamples: int = 1000,
    seed: int = 0,
) -> ConsistencyTest:
    raise NotImplementedError
