"""Thermostat's settings: one pydantic-settings class, read once at the entry point.

Every field reads from an environment variable with the ``THERMOSTAT_`` prefix
(``THERMOSTAT_STATE_DIR``, ``THERMOSTAT_GATE_TARGET_ACCURACY``, ...). The defaults put
MLflow's SQLite store and artifacts under a local state folder, so nothing has to run first.

Credentials: the URL fields (tracking and registry URI, artifact location, prediction log URL,
MLflow UI URL) may carry ``user:password@`` (or a web URL a token as its user). Their JSON form — what Prefect stores as the
flow run's parameters when settings are passed to a flow — and their ``repr`` have the password
masked (``***``), and a URL with a masked password is refused on the way in: a worker reads the real
secrets from its own environment (``THERMOSTAT_*``), never from a flow parameter.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from calibration import (
    DEFAULT_BOOTSTRAP_RESAMPLES,
    DEFAULT_BOUNDS,
    DEFAULT_CONFIDENCE_LEVEL,
    DEFAULT_MAX_TV_DISTANCE,
    DEFAULT_MIN_PER_CLASS,
    DEFAULT_MIN_TOTAL,
    DEFAULT_N_BINS,
)
from flows.defaults import DEFAULT_DASK_TIMEOUT, DEFAULT_MIN_ACCURACY, MAX_DASK_TIMEOUT
from monitoring import (
    DEFAULT_SERVING_LOG_TIMEOUT_MS,
    DEFAULT_STATE_DIR,
    MAX_RETENTION,
    URL_MASK,
    DriftPolicy,
    default_log_url,
    holds_masked_credentials,
    mask_url,
    policy_knobs,
    redact_credentials,
)

__all__ = ["ThermostatSettings"]

# The shortest bearer token the ingestion service accepts: a guessable one is no lock.
MIN_TOKEN_LENGTH = 16

# Fields that hold a URL, which may carry credentials (masked in the settings' JSON form).
_URL_FIELDS = ("tracking_uri", "registry_uri", "artifact_location", "prediction_log_url", "mlflow_ui_url",
               "prefect_ui_url")
# The drift section's settings, each a DriftPolicy field under another name.
_POLICY_FIELDS: Final = {knob.setting: name for name, knob, _ in policy_knobs()}


def _names(value: Any) -> Any:
    # THERMOSTAT_INGEST_TOKENS=a,b: a comma-separated list from the environment.
    return tuple(part.strip() for part in value.split(",") if part.strip()) if isinstance(value, str) else value


def _drift_section() -> type[BaseSettings]:
    """The drift section: the fields of :class:`monitoring.DriftPolicy` themselves (type, default,
    rule, description), each under its setting's name."""
    fields: dict[str, Any] = {setting: (DriftPolicy.model_fields[name].annotation, DriftPolicy.model_fields[name])
                              for setting, name in _POLICY_FIELDS.items()}
    return create_model("DriftSection", __base__=BaseSettings, **fields)


if TYPE_CHECKING:
    _DriftSection = BaseSettings
else:
    _DriftSection = _drift_section()


class ThermostatSettings(_DriftSection):
    """Where state lives and every limit the post-finetune pipeline, the monitor and the refit apply.

    Durations (``monitor_window``, ``drift_cooldown``, ``label_settle_time``, ``refit_retry_after``) read ISO 8601 from the environment:
    ``THERMOSTAT_MONITOR_WINDOW=PT24H``, ``THERMOSTAT_DRIFT_COOLDOWN=PT6H``.

    Examples
    --------
    >>> s = ThermostatSettings(state_dir="/tmp/thermostat-doc")
    >>> s.resolved_tracking_uri()
    'sqlite:////tmp/thermostat-doc/mlflow.db'
    """

    # hide_input_in_errors: a refusal never echoes the other values, which may hold credentials; a list
    # reads comma-separated (THERMOSTAT_DRIFT_TESTS=temperature,ece), not decoded as JSON.
    model_config = SettingsConfigDict(env_prefix="THERMOSTAT_", frozen=True, extra="forbid", hide_input_in_errors=True,
                                      enable_decoding=False)
    _drift: DriftPolicy = PrivateAttr()

    # Where things live.
    state_dir: Path = Field(default=Path(DEFAULT_STATE_DIR), description="local state folder")
    tracking_uri: str | None = Field(
        default=None, description="MLflow tracking URI (default: sqlite:///<state_dir>/mlflow.db)"
    )
    registry_uri: str | None = Field(default=None, description="MLflow registry URI (default: the tracking URI)")
    artifact_location: str | None = Field(
        default=None, description="artifact root of new MLflow experiments (default: <state_dir>/artifacts, or the server's with THERMOSTAT_TRACKING_URI)"
    )
    experiment_name: str = Field(default="thermostat", description="MLflow experiment of pipeline runs")

    # Fitting T: minimise the NLL in log T inside the bounds; a fit on a bound is never registered.
    bounds_lower: float = Field(default=DEFAULT_BOUNDS[0], gt=0.0, description="lower bound of the temperature search")
    bounds_upper: float = Field(default=DEFAULT_BOUNDS[1], gt=0.0, description="upper bound of the temperature search")
    n_bins: int = Field(default=DEFAULT_N_BINS, ge=1, description="equal-width ECE bins")

    # Splitting the holdout: test data never chooses T.
    calibration_fraction: float = Field(
        default=0.5, gt=0.0, lt=1.0, description="share of the holdout used to fit T; the rest evaluates"
    )
    bootstrap_resamples: int = Field(default=DEFAULT_BOOTSTRAP_RESAMPLES, ge=100, description="paired-bootstrap resamples of the NLL change")
    bootstrap_confidence_level: float = Field(default=DEFAULT_CONFIDENCE_LEVEL, gt=0.0, lt=1.0, description="level of the bootstrap interval")

    # Gate: auto-process iff calibrated confidence >= threshold, re-swept after every refit.
    gate_target_accuracy: float = Field(
        default=0.97, gt=0.0, lt=1.0, description="accepted accuracy whose lower bound the gate must meet"
    )
    gate_confidence_level: float = Field(default=DEFAULT_CONFIDENCE_LEVEL, gt=0.0, lt=1.0, description="level of the Wilson lower bound")

    # Qualification of the calibration part: like production, disjoint from training, large enough.
    min_total: int = Field(default=DEFAULT_MIN_TOTAL, ge=1, description="minimum calibration examples")
    min_per_class: int = Field(default=DEFAULT_MIN_PER_CLASS, ge=1, description="minimum calibration examples per class")
    max_tv_distance: float = Field(
        default=DEFAULT_MAX_TV_DISTANCE, ge=0.0, le=1.0, description="largest total-variation distance to the reference class mix"
    )

    # Acceptance: the first step after every fine-tune.
    min_accuracy: float = Field(default=DEFAULT_MIN_ACCURACY, ge=0.0, le=1.0, description="holdout accuracy floor")
    max_regression: float = Field(
        default=0.01, ge=0.0, le=1.0, description="largest allowed holdout accuracy drop below the alias holder"
    )

    # MLflow's own HTTP layer, under the adapter's 4 attempts of every call that is safe to repeat:
    # bounded so that a check fails within minutes when the server is gone (docs/guarantees.md).
    mlflow_http_max_retries: int = Field(
        default=1, ge=0, le=10,
        description="times MLflow's HTTP client repeats a failed request itself (MLFLOW_HTTP_REQUEST_MAX_RETRIES; "
        "MLflow's default 7 takes about 4 minutes per call with the server down)",
    )
    mlflow_http_backoff_factor: int = Field(
        default=1, ge=0, le=120,
        description="MLflow's back-off between its own repeats: factor x 2^(n-1) s from the second repeat on "
        "(MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR)",
    )
    mlflow_http_timeout_seconds: int = Field(
        default=20, ge=1, le=600,
        description="how long one MLflow HTTP request waits for the server (MLFLOW_HTTP_REQUEST_TIMEOUT)",
    )

    # Registration.
    lock_timeout_seconds: float = Field(default=600.0, gt=0.0, description="wait for the per-model lock")
    lock_lease_seconds: float = Field(
        default=30.0, ge=3.0, description="the lock's lease, renewed every quarter of it; a dead holder elsewhere "
        "loses the lock once it expires, and a holder writes only within two thirds of it after its last renewal "
        "(workers' clocks must agree to well within the last third)",
    )

    # The embedded Prefect API (no PREFECT_API_URL): Prefect's own default gives up after 20 s, which
    # a first start (creating and migrating its database) exceeds when both cores are busy.
    prefect_startup_timeout_seconds: int = Field(
        default=180, ge=1,
        description="how long a run without PREFECT_API_URL waits for Prefect's temporary API server to start "
        "(passed to Prefect in place of PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)",
    )

    # The prediction log and the drift monitor.
    prediction_log_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the prediction log (default: sqlite:///<state_dir>/predictions.db; "
        "PostgreSQL in production)",
    )
    serving_log_timeout_ms: int = Field(
        default=DEFAULT_SERVING_LOG_TIMEOUT_MS, ge=1, le=600_000,
        description="when serving: the longest a prediction waits for its prediction-log write (ServedModel), and "
        "the connect and statement timeout of the log's database connections (ServedModel and the served pyfunc, "
        "which reads THERMOSTAT_SERVING_LOG_TIMEOUT_MS itself); a write that takes longer is counted lost",
    )
    monitoring_experiment_name: str = Field(
        default="thermostat-monitoring", description="MLflow experiment of the monitor's check runs"
    )
    mlflow_ui_url: str | None = Field(
        default=None,
        description="base URL of the MLflow UI for links in reports (default: the tracking URI when it is http(s))",
    )
    monitor_window: timedelta = Field(
        default=timedelta(hours=24), description="labelled traffic a check (and a refit) reads, ending now"
    )
    monitor_chunk_size: int = Field(
        default=50_000, ge=1, description="rows per chunk read from the prediction log (bounds memory)"
    )
    prefect_ui_url: str | None = Field(
        default=None, description="base URL of the Prefect UI for links to flow runs (default: Prefect's own "
        "PREFECT_UI_URL setting, when set)",
    )

    # Where the monitor and the refit read their window, and where the per-partition work runs.
    window_source: Literal["log", "export"] = Field(
        default="log",
        description="log: the SQL prediction log; export: its partitioned Parquet export (`thermostat export`) "
        "under export_path",
    )
    export_path: Path | None = Field(
        default=None, description="folder of the prediction-log export read when window_source is export"
    )
    engine: Literal["local", "dask"] = Field(
        default="local",
        description="local: the window is summarised in the flow's process; dask: one Prefect task per export "
        "partition on a Dask cluster (window_source export only)",
    )
    dask_address: str | None = Field(
        default=None, description="a running Dask scheduler, tcp://HOST:PORT (default: a temporary local cluster)"
    )
    dask_workers: int = Field(default=2, ge=1, description="workers of the temporary local Dask cluster")
    dask_timeout: float = Field(
        default=DEFAULT_DASK_TIMEOUT, gt=0, le=MAX_DASK_TIMEOUT, allow_inf_nan=False,
        description="seconds the per-partition tasks may wait while the Dask cluster has no worker at all; then "
        "they are cancelled and the check fails, naming the cause",
    )

    # Retention: what the monitor and the refit no longer read is removed (thermostat prune, the prune flow).
    retention: timedelta | None = Field(
        default=None,
        description="prediction-log rows served and monitor check runs started before the start of the UTC day "
        "that holds now minus this are removed by `thermostat prune` and the prune flow, the log's labelled rows "
        "archived to the export first (ISO 8601, e.g. P90D; longer than monitor_window); default: off, nothing "
        "is removed",
    )

    # The ingestion service (`thermostat ingest`): predictions and labels over HTTP.
    ingest_tokens: Annotated[tuple[SecretStr, ...], BeforeValidator(_names)] = Field(
        default=(),
        description="bearer tokens the ingestion service accepts (comma-separated, each at least "
        f"{MIN_TOKEN_LENGTH} characters); none: it serves loopback only, without a token. Masked in every "
        "stored, logged or shown form",
    )
    ingest_max_body_bytes: int = Field(
        default=32 * 2**20, ge=1024, le=2**31, description="largest request body the ingestion service reads (413 beyond)"
    )
    ingest_max_rows: int = Field(
        default=100_000, ge=1, description="most rows (predictions or labels) in one request to the ingestion service"
    )
    ingest_max_pending_rows: int = Field(
        default=500_000, ge=1,
        description="rows that may wait for the ingestion service's writer; a request beyond gets 429 with Retry-After",
    )
    ingest_write_timeout_seconds: float = Field(
        default=30.0, gt=0, le=3600, allow_inf_nan=False,
        description="how long a request waits for its rows to be written before 503 (they may still be written: "
        "resend them, ingest is idempotent by request id)",
    )

    # Refit on recent traffic: the first response to drift.
    refit_max_rows: int = Field(
        default=200_000, ge=2, description="a refit reads at most this many of the most recent labelled rows"
    )
    refit_fit_fraction: float = Field(
        default=0.5, gt=0.0, lt=1.0,
        description="older share of the refit's traffic that fits T; the newer rest verifies it",
    )
    refit_max_ece_increase: float = Field(
        default=0.02, ge=0.0, le=1.0, allow_inf_nan=False,
        description="a refit whose baseline ECE (hence its drift threshold) is worse than its parent's by more than "
        "this is refused: it would make the next drift harder to see",
    )
    refit_retry_after: timedelta = Field(
        default=timedelta(hours=1),
        description="a refit run by a deployment and refused as fitted on too little drifted data schedules its "
        "retry this long after (ISO 8601, e.g. PT1H), reading from the same start up to the retry's time",
    )
    refit_retries: int = Field(
        default=3, ge=0, le=100,
        description="how many retries one drift's refit schedules when each is refused as fitted on too little "
        "drifted data (0: none; then the next drift event after the cool-down starts a new refit)",
    )

    @field_validator(*_POLICY_FIELDS, mode="wrap")
    @classmethod
    def _name_the_variable(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        try:
            return handler(value)
        except ValidationError as error:  # refused in the policy's words, naming the variable
            knob = DriftPolicy.knob(_POLICY_FIELDS[str(info.field_name)])
            raise ValueError(str(knob.refusal(knob.variable, value, error))) from None

    @model_validator(mode="after")
    def _build_drift_policy(self) -> ThermostatSettings:
        # Each value was read and checked by its policy field above: not a second time.
        self._drift = DriftPolicy.model_construct(**{name: getattr(self, s) for s, name in _POLICY_FIELDS.items()})
        return self

    @property
    def drift(self) -> DriftPolicy:
        """The drift section: every parameter of the monitor's decisions (``THERMOSTAT_MIN_WINDOW``,
        ``THERMOSTAT_DRIFT_P_THRESHOLD``, ...; their defaults are :class:`monitoring.DriftPolicy`'s)."""
        return self._drift

    @model_validator(mode="after")
    def _check_bounds(self) -> ThermostatSettings:
        if not self.bounds_lower < 1.0 < self.bounds_upper:
            raise ValueError(
                f"temperature bounds ({self.bounds_lower}, {self.bounds_upper}) must enclose T = 1; "
                "set THERMOSTAT_BOUNDS_LOWER < 1 < THERMOSTAT_BOUNDS_UPPER"
            )
        if self.monitor_window <= timedelta(0):
            raise ValueError(
                f"monitor_window must be positive; got {self.monitor_window} (e.g. THERMOSTAT_MONITOR_WINDOW=PT24H)"
            )
        if self.refit_retry_after <= timedelta(0):
            raise ValueError(f"refit_retry_after must be positive; got {self.refit_retry_after} "
                             "(e.g. THERMOSTAT_REFIT_RETRY_AFTER=PT1H)")
        if self.retention is not None and self.retention <= self.monitor_window:
            raise ValueError(
                f"retention {self.retention} is not longer than monitor_window {self.monitor_window}: the checks "
                "read that far back; set THERMOSTAT_RETENTION longer (e.g. P90D), or unset it to keep everything"
            )
        if self.retention is not None and self.retention > MAX_RETENTION:
            raise ValueError(
                f"retention {self.retention} is longer than the longest, {MAX_RETENTION.days} days "
                f"(P{MAX_RETENTION.days}D); unset THERMOSTAT_RETENTION to keep everything"
            )
        if self.window_source == "export" and self.export_path is None:
            raise ValueError("window_source is export but export_path is not set; set THERMOSTAT_EXPORT_PATH to the "
                             "folder `thermostat export --out` writes")
        if self.engine == "dask" and self.window_source != "export":
            raise ValueError("engine dask runs the window's per-partition work on the partitioned export: set "
                             "THERMOSTAT_WINDOW_SOURCE=export (and THERMOSTAT_EXPORT_PATH), or THERMOSTAT_ENGINE=local")
        return self

    @field_validator("ingest_tokens")
    @classmethod
    def _check_tokens(cls, tokens: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        for position, token in enumerate(tokens):
            value = token.get_secret_value()
            if value == URL_MASK or set(value) == {"*"}:
                raise ValueError(f"ingest_tokens[{position}] is masked ({URL_MASK}): the stored form of settings never "
                                 "carries tokens; set THERMOSTAT_INGEST_TOKENS in the service's environment")
            if len(value) < MIN_TOKEN_LENGTH or any(c.isspace() or not c.isprintable() for c in value):
                # The length only: a refusal never shows a token, not even a short one.
                raise ValueError(f"ingest_tokens[{position}] has {len(value)} characters; a token needs at least "
                                 f"{MIN_TOKEN_LENGTH}, printable, without spaces (e.g. `openssl rand -hex 32`)")
        return tokens

    @field_serializer("ingest_tokens", when_used="json")
    def _mask_tokens(self, tokens: tuple[SecretStr, ...]) -> list[str]:
        return [URL_MASK for _ in tokens]

    def __repr_args__(self) -> Any:
        # repr() and str() are printed and logged (a traceback's locals, a debug line): URLs masked.
        for name, value in super().__repr_args__():
            yield name, (mask_url(value) if name in _URL_FIELDS and isinstance(value, str) else value)

    @field_serializer(*_URL_FIELDS, when_used="json")
    def _mask_credentials(self, value: str | None) -> str | None:
        # Prefect stores flow parameters as this JSON: it never holds a password.
        return None if value is None else mask_url(value)

    @field_validator(*_URL_FIELDS)
    @classmethod
    def _refuse_masked_credentials(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and holds_masked_credentials(value):
            variable = f"THERMOSTAT_{(info.field_name or '').upper()}"
            raise ValueError(
                f"{info.field_name} {value!r} holds a masked password or token ({URL_MASK}): the stored form of "
                "settings never carries credentials; leave settings out of the flow's parameters and set "
                f"{variable} in the worker's environment"
            )
        return value

    def redacted(self, text: str) -> str:
        """``text`` (an error message) with the credentials of every URL setting taken out, e.g.
        before it is stored with a failed check.

        Examples
        --------
        >>> settings = ThermostatSettings(tracking_uri="http://u:s3cret@mlflow:5000")
        >>> settings.redacted("GET http://u:s3cret@mlflow:5000/api failed")
        'GET http://u:***@mlflow:5000/api failed'
        """
        return redact_credentials(text, *self.urls())

    def urls(self) -> tuple[str, ...]:
        """The URL settings that are set (tracking and registry URI, artifact location, prediction
        log, MLflow and Prefect UI): what :meth:`redacted` and :func:`monitoring.credentials_redacted`
        take the credentials of."""
        return tuple(url for url in (getattr(self, name) for name in _URL_FIELDS) if url)

    def mlflow_http_environment(self) -> dict[str, str]:
        """The environment variables through which MLflow's HTTP client reads its retries and
        timeout (at every request); a server's ``Retry-After`` is not obeyed, so that no answer
        can stretch a retry beyond these bounds.

        Examples
        --------
        >>> ThermostatSettings().mlflow_http_environment()["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
        '1'
        """
        return {
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(self.mlflow_http_max_retries),
            "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": str(self.mlflow_http_backoff_factor),
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(self.mlflow_http_timeout_seconds),
            "MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER": "false",
        }

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.bounds_lower, self.bounds_upper)

    def resolved_tracking_uri(self) -> str:
        if self.tracking_uri:
            return self.tracking_uri
        return f"sqlite:///{self.state_dir.absolute() / 'mlflow.db'}"

    def resolved_registry_uri(self) -> str:
        return self.registry_uri or self.resolved_tracking_uri()

    def resolved_prediction_log_url(self) -> str:
        return self.prediction_log_url or default_log_url(self.state_dir)

    def resolved_mlflow_ui_url(self) -> str | None:
        """Where links to MLflow runs point; None when there is no UI to link to (SQLite store).

        Links are shown and stored (reports, Prefect artifacts), so the password is masked.
        """
        if self.mlflow_ui_url:
            return mask_url(self.mlflow_ui_url.rstrip("/"))
        uri = self.resolved_tracking_uri()
        return mask_url(uri.rstrip("/")) if uri.startswith(("http://", "https://")) else None

    def resolved_artifact_location(self) -> str | None:
        """Artifact root for new experiments: ``<state_dir>/artifacts`` with the embedded SQLite
        store; with an explicit tracking URI (an ``mlflow server``), the server decides."""
        if self.artifact_location:
            return self.artifact_location
        if self.tracking_uri:
            return None
        return (self.state_dir.absolute() / "artifacts").as_uri()
