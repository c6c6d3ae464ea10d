"""The calibrated pyfunc: a checkpoint's MLflow model with its temperature and gate applied.

This file is logged as an MLflow "model from code" (it ends in ``set_model``), so the
registered artifact carries this source instead of a cloud-pickled object. It imports only
numpy, pandas and mlflow: the served model does not need Thermostat installed.

``context.model_config`` holds, and so the registered version carries:

- ``temperature`` — T > 0; the served probabilities are softmax(z / T) (the arg-max never changes);
- ``gate_threshold`` — auto-process when the calibrated confidence >= it; ``None`` sends
  everything to review (no threshold met the target accuracy);
- ``checkpoint_output`` — ``"logits"`` or ``"probabilities"``: what the checkpoint's
  ``predict`` returns. Probabilities become logits through their log (softmax is
  shift-invariant per row).

``predict`` returns a DataFrame with one row per input row: ``class``, ``confidence``,
``decision`` (``"auto"``/``"review"``) and ``prob_0`` ... ``prob_{K-1}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from mlflow.models import set_model
from mlflow.pyfunc.model import PythonModel, PythonModelContext

__all__ = ["CHECKPOINT_ARTIFACT", "CalibratedCheckpointModel", "calibrated_frame"]

CHECKPOINT_ARTIFACT = "checkpoint"


def calibrated_frame(logits: np.ndarray[Any, Any], temperature: float, gate_threshold: float | None) -> pd.DataFrame:
    """Class, calibrated confidence, gate decision and probabilities from frozen logits.

    Same arithmetic as ``calibration._softmax.softmax``: subtract the row maximum, divide
    by T, exponentiate, normalise, in float64.
    """
    shifted = (logits - logits.max(axis=1, keepdims=True)).astype(np.float64, copy=False) / temperature
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    predicted = logits.argmax(axis=1)
    confidence = probabilities[np.arange(logits.shape[0]), predicted]
    if gate_threshold is None:
        decision = np.full(logits.shape[0], "review", dtype=object)
    else:
        decision = np.where(confidence >= gate_threshold, "auto", "review").astype(object)
    frame = pd.DataFrame({"class": predicted.astype(np.int64), "confidence": confidence, "decision": decision})
    for k in range(probabilities.shape[1]):
        frame[f"prob_{k}"] = probabilities[:, k]
    return frame


class CalibratedCheckpointModel(PythonModel):
    """Wraps the checkpoint's pyfunc; applies T and the gate from ``model_config``."""

    def load_context(self, context: PythonModelContext) -> None:
        import mlflow.pyfunc

        config = context.model_config or {}
        temperature = float(config["temperature"])
        if not np.isfinite(temperature) or temperature <= 0:
            raise ValueError(f"model_config temperature must be a finite T > 0, got {temperature!r}")
        threshold = config.get("gate_threshold")
        output = config.get("checkpoint_output", "logits")
        if output not in ("logits", "probabilities"):
            raise ValueError(f"model_config checkpoint_output must be 'logits' or 'probabilities', got {output!r}")
        self._temperature = temperature
        self._threshold = None if threshold is None else float(threshold)
        self._from_probabilities = output == "probabilities"
        self._checkpoint = mlflow.pyfunc.load_model(context.artifacts[CHECKPOINT_ARTIFACT])

    @property
    def temperature(self) -> float:
        """The T this model applies (from ``model_config``)."""
        return self._temperature

    @property
    def gate_threshold(self) -> float | None:
        return self._threshold

    def raw_logits(self, model_input: Any) -> np.ndarray[Any, Any]:
        """The frozen logits z the calibrated probabilities are computed from (before dividing by T).

        For a checkpoint that returns probabilities, their log. The serving helper logs these to
        the prediction log, so the monitor can re-read the traffic at any temperature.
        """
        raw = np.asarray(self._checkpoint.predict(model_input), dtype=np.float64)
        if raw.ndim != 2 or raw.shape[1] < 2:
            raise ValueError(f"the checkpoint returned an array of shape {raw.shape}; expected (n_samples, n_classes >= 2)")
        # Log-probabilities are valid logits: softmax(log p / T) = p^(1/T) renormalised.
        with np.errstate(divide="ignore"):
            logits = np.log(raw) if self._from_probabilities else raw
        if not np.isfinite(logits).all():
            row = int(np.flatnonzero(~np.isfinite(logits).all(axis=1))[0])
            raise ValueError(f"the checkpoint's output row {row} is not finite after conversion to logits")
        return logits

    def predict(
        self, context: PythonModelContext, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        return calibrated_frame(self.raw_logits(model_input), self._temperature, self._threshold)


set_model(CalibratedCheckpointModel())
