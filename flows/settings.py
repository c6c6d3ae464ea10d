"""Thermostat's settings: one pydantic-settings class, read once at the entry point.

Every field reads from an environment variable with the ``THERMOSTAT_`` prefix
(``THERMOSTAT_STATE_DIR``, ``THERMOSTAT_GATE_TARGET_ACCURACY``, ...). The defaults put
MLflow's SQLite store and artifacts under a local state folder, so nothing has to run first.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ThermostatSettings"]


class ThermostatSettings(BaseSettings):
    """Where state lives and every limit the post-finetune pipeline applies.

    Examples
    --------
    >>> s = ThermostatSettings(state_dir="/tmp/thermostat-doc")
    >>> s.resolved_tracking_uri()
    'sqlite:////tmp/thermostat-doc/mlflow.db'
    """

    model_config = SettingsConfigDict(env_prefix="THERMOSTAT_", frozen=True, extra="forbid")

    # Where things live.
    state_dir: Path = Field(default=Path(".thermostat"), description="local state folder")
    tracking_uri: str | None = Field(
        default=None, description="MLflow tracking URI (default: sqlite:///<state_dir>/mlflow.db)"
    )
    registry_uri: str | None = Field(default=None, description="MLflow registry URI (default: the tracking URI)")
    artifact_location: str | None = Field(
        default=None, description="artifact root of new MLflow experiments (default: <state_dir>/artifacts, or the server's with THERMOSTAT_TRACKING_URI)"
    )
    experiment_name: str = Field(default="thermostat", description="MLflow experiment of pipeline runs")

    # Fitting T (rule 2, 3).
    bounds_lower: float = Field(default=0.05, gt=0.0, description="lower bound of the temperature search")
    bounds_upper: float = Field(default=20.0, gt=0.0, description="upper bound of the temperature search")
    n_bins: int = Field(default=15, ge=1, description="equal-width ECE bins")
    min_bin_count: int = Field(default=10, ge=1, description="bins with fewer examples are marked sparse")

    # Splitting the holdout (rule 5).
    calibration_fraction: float = Field(
        default=0.5, gt=0.0, lt=1.0, description="share of the holdout used to fit T; the rest evaluates"
    )
    seed: int = Field(default=0, description="seed of the split and of the bootstrap")
    bootstrap_resamples: int = Field(default=2000, ge=100, description="paired-bootstrap resamples of the NLL change")
    bootstrap_confidence_level: float = Field(default=0.95, gt=0.0, lt=1.0, description="level of the bootstrap interval")

    # Gate (rule 8).
    gate_target_accuracy: float = Field(
        default=0.97, gt=0.0, le=1.0, description="accepted accuracy whose lower bound the gate must meet"
    )
    gate_confidence_level: float = Field(default=0.95, gt=0.0, lt=1.0, description="level of the Wilson lower bound")

    # Qualification of the calibration part (rule 4).
    min_total: int = Field(default=300, ge=1, description="minimum calibration examples")
    min_per_class: int = Field(default=30, ge=1, description="minimum calibration examples per class")
    max_tv_distance: float = Field(
        default=0.15, ge=0.0, le=1.0, description="largest total-variation distance to the reference class mix"
    )

    # Acceptance (rule 9, step 1).
    min_accuracy: float = Field(default=0.5, ge=0.0, le=1.0, description="holdout accuracy floor")
    max_regression: float = Field(
        default=0.01, ge=0.0, le=1.0, description="largest allowed holdout accuracy drop below the alias holder"
    )

    # Registration.
    lock_timeout_seconds: float = Field(default=600.0, gt=0.0, description="wait for the per-model lock")

    @model_validator(mode="after")
    def _check_bounds(self) -> ThermostatSettings:
        if not self.bounds_lower < 1.0 < self.bounds_upper:
            raise ValueError(
                f"temperature bounds ({self.bounds_lower}, {self.bounds_upper}) must enclose T = 1; "
                "set THERMOSTAT_BOUNDS_LOWER < 1 < THERMOSTAT_BOUNDS_UPPER"
            )
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.bounds_lower, self.bounds_upper)

    def resolved_tracking_uri(self) -> str:
        if self.tracking_uri:
            return self.tracking_uri
        return f"sqlite:///{self.state_dir.absolute() / 'mlflow.db'}"

    def resolved_registry_uri(self) -> str:
        return self.registry_uri or self.resolved_tracking_uri()

    def resolved_artifact_location(self) -> str | None:
        """Artifact root for new experiments: ``<state_dir>/artifacts`` with the embedded SQLite
        store; with an explicit tracking URI (an ``mlflow server``), the server decides."""
        if self.artifact_location:
            return self.artifact_location
        if self.tracking_uri:
            return None
        return (self.state_dir.absolute() / "artifacts").as_uri()
