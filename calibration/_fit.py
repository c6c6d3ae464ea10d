"""Fitting the temperature: minimise mean NLL over log T inside explicit bounds.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["TemperatureFit", "fit_temperature", "DEFAULT_BOUNDS"]

DEFAULT_BOUNDS: tuple[float, float] = (0.05, 20.0)


@dataclass(frozen=True, slots=True)
class TemperatureFit:
    """The fitted temperature and the evidence around it.

    ``nll_before`` and ``nll_after`` are *mean* NLL in nats (``nll_reduction == "mean"``),
    at T = 1 and at the fitted T. ``at_bound`` is ``"lower"``/``"upper"`` when the optimum
    sits on a bound (such a fit must not be trusted), else ``None``.
    """

    temperature: float
    nll_before: float
    nll_after: float
    at_bound: Literal["lower", "upper"] | None
    n: int
    n_classes: int
    bounds: tuple[float, float]
    nll_reduction: Literal["mean"] = "mean"


def fit_temperature(logits: object, labels: object, *, bounds: tuple[float, float] = DEFAULT_BOUNDS) -> TemperatureFit:
    raise NotImplementedError
