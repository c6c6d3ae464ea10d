"""A prior correction: the class priors a version's posteriors are re-weighted to, as one value.

A label shift (the class mix moves, p(x | y) stays) is fixed without refitting anything: the
served posteriors softmax(z / T) are re-weighted by w = π' / π and renormalised
(:func:`calibration.prior_corrected_log_probabilities`), π' the traffic's priors and π the
priors the posteriors are calibrated for. :class:`PriorCorrection` holds the pair, checked once
when it is made (K ≥ 2 each, the same K, every prior finite and > 0; each normalised to sum 1),
and writes itself as JSON (every digit: the tag gives back the exact float64 that was applied).

A correction whose priors equal its reference priors is the identity: :meth:`PriorCorrection.is_identity`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._priors import _as_vector, prior_corrected_log_probabilities
from ._serialise import JsonResult

__all__ = ["PriorCorrection"]


@dataclass(frozen=True, slots=True, eq=False)
class PriorCorrection(JsonResult):
    """The traffic's class priors ``priors`` (π') and the priors ``reference_priors`` (π) the
    version's posteriors at T are calibrated for; both of shape (n_classes,), normalised.

    Raises
    ------
    ValueError
        If either has fewer than 2 classes, the two differ in length, or a prior is not a
        finite number > 0 (a class with prior 0 could never be predicted).

    Examples
    --------
    >>> correction = PriorCorrection([0.8, 0.2], [1, 1])
    >>> correction.reference_priors.tolist(), correction.weights.tolist()
    ([0.5, 0.5], [1.6, 0.4])
    >>> PriorCorrection.from_json(correction.to_json()) == correction
    True
    >>> np.exp(correction.log_probabilities([[0.0, 0.0]], temperature=2.0)).round(6).tolist()
    [[0.8, 0.2]]
    """

    priors: NDArray[np.float64]
    reference_priors: NDArray[np.float64]

    def __init__(self, priors: ArrayLike, reference_priors: ArrayLike) -> None:
        reference = np.asarray(reference_priors, dtype=np.float64)
        if reference.ndim != 1 or reference.shape[0] < 2:
            raise ValueError(f"reference_priors must hold one prior per class (at least 2); got shape {reference.shape}")
        k = reference.shape[0]
        object.__setattr__(self, "priors", _as_vector(priors, k, "priors", positive=True))
        object.__setattr__(self, "reference_priors", _as_vector(reference, k, "reference_priors", positive=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PriorCorrection):
            return NotImplemented
        return bool(np.array_equal(self.priors, other.priors) and np.array_equal(self.reference_priors,
                                                                                other.reference_priors))

    def __hash__(self) -> int:
        return hash((self.priors.tobytes(), self.reference_priors.tobytes()))

    def __repr__(self) -> str:
        return f"PriorCorrection(priors={self.priors.tolist()!r}, reference_priors={self.reference_priors.tolist()!r})"

    @property
    def n_classes(self) -> int:
        return int(self.priors.shape[0])

    @property
    def weights(self) -> NDArray[np.float64]:
        """w = π' / π, what each class's posterior is multiplied by before renormalising."""
        result: NDArray[np.float64] = self.priors / self.reference_priors
        return result

    @property
    def log_weights(self) -> NDArray[np.float64]:
        """log π' − log π (added to the log-posteriors; computed from the logs, not from ``weights``)."""
        result: NDArray[np.float64] = np.log(self.priors) - np.log(self.reference_priors)
        return result

    def is_identity(self, *, tolerance: float = 1e-12) -> bool:
        """True when no class's weight differs from 1 by more than ``tolerance``: the correction
        changes nothing (the mix went back to the reference's).

        >>> PriorCorrection([0.5, 0.5], [1, 1]).is_identity(), PriorCorrection([0.6, 0.4], [1, 1]).is_identity()
        (True, False)
        """
        return bool(np.all(np.abs(self.log_weights) <= tolerance))

    def log_probabilities(self, logits: ArrayLike, *, temperature: float) -> NDArray[np.float64]:
        """log of softmax(``logits`` / ``temperature``) re-weighted by π' / π and renormalised
        (:func:`calibration.prior_corrected_log_probabilities`)."""
        return prior_corrected_log_probabilities(logits, temperature=temperature, priors=self.priors,
                                                 reference_priors=self.reference_priors)

    def to_dict(self) -> dict[str, Any]:
        return {"priors": self.priors.tolist(), "reference_priors": self.reference_priors.tolist()}

    def to_json(self) -> str:
        """``{"priors": [...], "reference_priors": [...]}`` with every digit (what :meth:`from_json` reads)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Any) -> PriorCorrection:
        """Read :meth:`to_dict` back; a ValueError names what is missing or malformed."""
        if not isinstance(data, dict) or set(data) != {"priors", "reference_priors"}:
            keys = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"a prior correction is an object with exactly 'priors' and 'reference_priors'; got {keys}")
        for name in ("priors", "reference_priors"):
            value = data[name]
            if not isinstance(value, list) or not all(
                    isinstance(item, (int, float)) and not isinstance(item, bool) for item in value):
                raise ValueError(f"a prior correction's {name!r} must be a list of numbers; got {value!r}")
        return cls(data["priors"], data["reference_priors"])

    @classmethod
    def from_json(cls, text: str) -> PriorCorrection:
        """Read :meth:`to_json` back; a ValueError says what is wrong."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"a prior correction must be JSON ({error})") from error
        return cls.from_dict(data)
