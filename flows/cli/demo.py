"""``thermostat demo``: the main job on scikit-learn's bundled digits, with nothing running.

Two "fine-tuned" checkpoints are trained, logged to MLflow as models whose ``predict``
returns logits (log-probabilities), and each goes through ``post_finetune`` in-process:
an over-confident logistic regression becomes ``digits@champion`` and a small MLP becomes
``digits@challenger``, each with its own temperature. Everything lands in the state folder
(``THERMOSTAT_STATE_DIR``, default ``./.thermostat``).

Then the monitor story, in-process: a router serves digits traffic through both aliases
(:class:`flows.registry.serving.ServedModel`, which writes every prediction to the prediction log;
labels arrive a moment later), and after each phase the ``monitor`` flow checks the phase's
window:

A. in-distribution traffic → ``ok``;
B. noisy digits (Gaussian pixel noise): the champion is over-confident → ``drift`` and the
   drift event → the ``refit`` flow (called in-process: no deployment runs here) fits a new T
   on the older half of the traffic, verifies it on the newer half and registers a new version
   of the same checkpoint; the challenger collapses under the noise → its refit is refused
   ("needs retraining or a data fix");
C. fresh noisy traffic → the new champion version says ``ok``; the challenger still drifts,
   inside its cool-down (no second event);
D. a campaign: digit 3 becomes 40 % of the requests, each digit looking as before → the check's
   shift diagnosis says **label shift** (the class priors moved; at the re-weighted posteriors
   the calibration tests are quiet) → no temperature refit: the ``correct-priors`` flow
   (in-process here; deployed: the label-shift event's trigger) registers a prior-corrected
   version of the same checkpoint, T unchanged;
E. the campaign ends, the mix returns → the corrected version's check finds the priors back at
   the reference's → the correction is taken off (a version without it);
F. the usual traffic through that version → ``ok``.

A second run reuses the checkpoints logged by the first (same files, same digest), so the
pipeline's idempotency key matches and nothing new is registered. For the monitor story it
puts the aliases back on the post-finetune versions (a rollback, as an operator would do),
serves new traffic (new request ids, new time windows) and tells the story again — except
that the previous run's drift events still hold the cool-down, so the champion's refit is
started by hand. Delete the state folder to start over.
"""

from __future__ import annotations

import logging
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np
from numpy.typing import NDArray

from flows.orchestration.local_only import stay_local

# MLflow, Prefect, scikit-learn and the flows are imported where they are used, once the
# arguments are parsed: `thermostat demo --help` answers at once.
if TYPE_CHECKING:
    from flows.pipelines.monitor import VersionCheck
    from flows.pipelines.refit import RefitOutcome
    from flows.pipelines.registration import Registration
    from flows.registry.adapter import MlflowRegistry
    from flows.registry.serving import ServedModel
    from flows.settings import ThermostatSettings
    from monitoring import DriftReport, PredictionLog

__all__ = [
    "DemoCheckpoint",
    "DigitsSplit",
    "command",
    "digits_split",
    "digits_traffic",
    "make_estimator",
    "train_checkpoint",
]

MODEL_NAME = "digits"
FINETUNE_EXPERIMENT = "thermostat-demo-finetunes"
# The router's traffic per phase: enough labelled rows for a verdict (min_window 500) per alias.
CHAMPION_ROWS = 1200
CHALLENGER_ROWS = 600
# Pixel noise (digits are 0..16) that makes the champion over-confident in a way one T mostly fixes.
NOISE_SIGMA = 1.75
# The label-shift episode: a campaign makes this digit this share of the requests.
SHIFTED_DIGIT = 3
SHIFTED_SHARE = 0.4
# The router serves a phase in batches, each stamped with its own serving time, so that the
# refit's split by time (older rows fit T, newer rows verify it) falls between real batches.
BATCH_ROWS = 50
LOG_FILE_NAME = "demo.log"
# Loggers that write to the terminal: the root (Prefect's console handler, where flow and task
# run logs propagate), MLflow's own, and the Prefect server's uvicorn/fastapi.
_CONSOLE_LOGGERS = ("", "mlflow", "alembic", "uvicorn", "fastapi")


@dataclass(frozen=True, slots=True, eq=False)
class DigitsSplit:
    """Digits split into a training part and a holdout, with ids ``digit-0000`` ..."""

    ids: NDArray[np.str_]
    features: NDArray[np.float64]
    labels: NDArray[np.intp]
    train_index: NDArray[np.intp]
    holdout_index: NDArray[np.intp]

    @property
    def training_ids(self) -> NDArray[np.str_]:
        return self.ids[self.train_index]


@dataclass(frozen=True, slots=True)
class DemoCheckpoint:
    name: str
    uri: str
    train_steps: int
    reused: bool


def digits_split(*, holdout_fraction: float = 0.5, seed: int = 0) -> DigitsSplit:
    """scikit-learn's 1,797 8×8 digits, split stratified by label (seeded)."""
    from sklearn.datasets import load_digits  # type: ignore[import-untyped]
    from sklearn.model_selection import train_test_split  # type: ignore[import-untyped]

    features, labels = load_digits(return_X_y=True)
    ids = np.array([f"digit-{i:04d}" for i in range(len(labels))])
    train_index, holdout_index = train_test_split(
        np.arange(len(labels)), test_size=holdout_fraction, stratify=labels, random_state=seed
    )
    return DigitsSplit(ids=ids, features=features.astype(np.float64), labels=labels.astype(np.intp),
                       train_index=np.sort(train_index), holdout_index=np.sort(holdout_index))


def make_estimator(kind: str, seed: int) -> Any:
    """``"logistic"``: weakly regularised, so over-confident (T > 1); ``"mlp"``: one hidden layer."""
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
    from sklearn.neural_network import MLPClassifier  # type: ignore[import-untyped]
    from sklearn.pipeline import make_pipeline  # type: ignore[import-untyped]
    from sklearn.preprocessing import StandardScaler  # type: ignore[import-untyped]

    if kind == "logistic":
        return make_pipeline(StandardScaler(), LogisticRegression(C=1e4, max_iter=5000))
    if kind == "mlp":
        return make_pipeline(StandardScaler(), MLPClassifier((64,), alpha=1e-6, max_iter=500, random_state=seed))
    raise ValueError(f"unknown estimator kind {kind!r}; use 'logistic' or 'mlp'")


def train_checkpoint(
    registry: MlflowRegistry, split: DigitsSplit, *, name: str, estimator: Any, reuse: bool = True,
    n_train: int | None = None,
) -> DemoCheckpoint:
    """Train ("fine-tune") a scikit-learn classifier on the training part (its first
    ``n_train`` rows if given) and log it as an MLflow model whose pyfunc ``predict`` returns
    log-probabilities (valid logits).

    With ``reuse``, a checkpoint already logged under ``name`` is returned instead.
    """
    import mlflow.sklearn
    from mlflow.models import infer_signature

    from flows.records.evidence import RunEvidence

    if reuse:
        run = registry.finished_run_tagged(FINETUNE_EXPERIMENT, "thermostat.demo_checkpoint", name)
        if run is not None:
            return DemoCheckpoint(name, f"runs:/{run.run_id}/checkpoint", int(run.params["train_steps"]), True)
    rows = split.train_index[:n_train]
    x_train, y_train = split.features[rows], split.labels[rows]
    estimator.fit(x_train, y_train)
    final = estimator.steps[-1][1]
    train_steps = int(np.max(getattr(final, "n_iter_", 0)))
    run_id = registry.start_run(f"fine-tune {name}", {"thermostat.demo_checkpoint": name},
                                experiment_name=FINETUNE_EXPERIMENT)
    registry.log_evidence(run_id, RunEvidence(params={"estimator": repr(estimator), "train_steps": train_steps,
                                                      "n_train": len(y_train)}))
    signature = infer_signature(x_train[:5], estimator.predict_log_proba(x_train[:5]))
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "checkpoint"
        # The demo's "user" checkpoint is a pickled scikit-learn model; MLflow warns about pickles.
        logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)
        mlflow.sklearn.save_model(
            estimator, str(path), serialization_format=mlflow.sklearn.SERIALIZATION_FORMAT_CLOUDPICKLE,
            pyfunc_predict_fn="predict_log_proba", signature=signature, pip_requirements=["scikit-learn", "numpy"],
        )
        registry.log_run_files(run_id, path, "checkpoint")
    registry.end_run(run_id)
    return DemoCheckpoint(name, f"runs:/{run_id}/checkpoint", train_steps, False)


def digits_traffic(
    split: DigitsSplit, n: int, rng: np.random.Generator, *, noise_sigma: float = 0.0,
    class_share: tuple[int, float] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """``n`` requests drawn (with replacement) from the holdout digits, never from training;
    with ``noise_sigma`` > 0, Gaussian pixel noise of that standard deviation, clipped to the
    pixel range [0, 16] ("noisy digits"); with ``class_share`` (class, share), that class is
    drawn as that share of the requests and the others in their own proportions (a label shift:
    each class's digits look as before)."""
    if class_share is None:
        rows = split.holdout_index[rng.integers(0, split.holdout_index.shape[0], n)]
    else:
        chosen, share = class_share
        held = split.labels[split.holdout_index]
        weights = np.where(held == chosen, share / np.sum(held == chosen), (1.0 - share) / np.sum(held != chosen))
        rows = split.holdout_index[rng.choice(held.shape[0], size=n, p=weights / weights.sum())]
    features = split.features[rows]
    if noise_sigma > 0:
        features = np.clip(features + rng.normal(scale=noise_sigma, size=features.shape), 0.0, 16.0)
    return features, split.labels[rows]


def _shown(value: float | None, form: str = ".4f") -> str:
    return "n/a" if value is None else format(value, form)


def _interval_shown(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f" [{interval[0]:.4f}, {interval[1]:.4f}] (95% interval)"


def _report(registration: Registration, seconds: float) -> str:
    from flows.records.versions import VersionRecord, binning_convention

    record = VersionRecord.from_tags(registration.tags, where=f"{registration.model_name} version {registration.version}")
    threshold = "none (everything goes to review)" if record.gate_threshold is None else f"{record.gate_threshold:.4f}"
    status = ("NEW version, alias moved" if registration.created
              else "already registered (same checkpoint, data and settings): nothing new, alias not moved")
    return "\n".join([
        f"{registration.model_name}@{registration.alias}: version {registration.version} — {status}  ({seconds:.1f} s)",
        f"  checkpoint      {record.checkpoint_uri}  digest {record.checkpoint_digest[:12]}",
        f"  temperature     T = {record.temperature:.4f}{_interval_shown(record.temperature_interval)}  "
        f"(calibration n = {record.calibration_n})",
        f"  gate            threshold {threshold} for target accuracy {record.gate_target_accuracy:.2f}: "
        f"coverage {_shown(record.gate_coverage, '.1%')}",
        f"  evaluation n={record.holdout_metrics_n}  NLL {_shown(record.holdout_nll_before)} -> "
        f"{_shown(record.holdout_nll_after)}  change {_shown(record.bootstrap_nll_change, '+.4f')} "
        f"[{_shown(record.bootstrap_nll_change_low, '+.4f')}, {_shown(record.bootstrap_nll_change_high, '+.4f')}] "
        f"-> {record.bootstrap_verdict}",
        f"                  ECE {record.holdout_ece_before:.4f} -> {record.holdout_ece_after:.4f}"
        f"  ({binning_convention(record.ece_n_bins, record.ece_scheme)})",
    ])


def _logs_to_file(path: Path) -> None:
    """Send every log record (Prefect's flow and task runs, MLflow, warnings) to ``path``
    instead of the terminal, which keeps the story, for the rest of the process (the
    in-process Prefect server is stopped at exit, and says so in the log)."""
    from prefect.logging.formatters import PrefectFormatter

    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(PrefectFormatter(
        format="%(asctime)s | %(levelname)-7s | %(name)s - %(message)s",
        flow_run_fmt="%(asctime)s | %(levelname)-7s | Flow run %(flow_run_name)r - %(message)s",
        task_run_fmt="%(asctime)s | %(levelname)-7s | Task run %(task_run_name)r - %(message)s",
    ))
    for name in _CONSOLE_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [h for h in logger.handlers if not _writes_to_terminal(h)] + [handler]
    logging.captureWarnings(True)


def _writes_to_terminal(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)


@click.command(help="The main job on scikit-learn's bundled digits, with nothing running: two checkpoints registered "
                    "calibrated, then the monitor story (drift, refit, label shift) in-process.")
@click.option("--state-dir", type=click.Path(path_type=Path), metavar="DIR",
              help="state folder (default: THERMOSTAT_STATE_DIR or ./.thermostat)")
def command(state_dir: Path | None) -> int:
    """Run the demo; returns the process exit code.

    The terminal gets the story; the flow logs go to ``demo.log`` in the state folder. Nothing
    leaves the machine (:func:`flows.orchestration.local_only.stay_local`).
    """
    stay_local()
    from flows.settings import ThermostatSettings

    settings = ThermostatSettings() if state_dir is None else ThermostatSettings(state_dir=state_dir)
    # The demo attaches labels in-process, committed before each check: no settle time needed for
    # the sequential rule to see them (production waits THERMOSTAT_LABEL_SETTLE_TIME, 5 min).
    settings = settings.model_copy(update={"label_settle_time": timedelta(0)})
    log_path = settings.state_dir.absolute() / LOG_FILE_NAME
    _logs_to_file(log_path)
    try:
        return _run(settings, log_path)
    except Exception as error:  # noqa: BLE001 - the story ends with one line; the log keeps the traceback
        logging.getLogger("thermostat.demo").error("the demo failed:\n%s", traceback.format_exc())
        print(f"\nThe demo failed: {type(error).__name__}: {error}\nThe full traceback is in {log_path}")
        return 1


def _run(settings: ThermostatSettings, log_path: Path) -> int:
    from flows.holdout import write_features, write_ids
    from flows.pipelines.post_finetune import post_finetune
    from flows.registry.adapter import MlflowRegistry
    from monitoring import mask_url

    started = time.perf_counter()
    fresh = not (settings.state_dir / "mlflow.db").exists() if settings.tracking_uri is None else False
    print(f"Thermostat demo — state in {settings.state_dir.absolute()} ({'fresh' if fresh else 'existing'})")
    print(f"Flow logs (Prefect flow and task runs, MLflow): {log_path}")
    registry = MlflowRegistry.from_settings(settings)

    split = digits_split(seed=settings.drift.seed)
    data_dir = settings.state_dir / "demo"
    features_path = write_features(data_dir / "holdout.npz", ids=split.ids[split.holdout_index],
                                   features=split.features[split.holdout_index], labels=split.labels[split.holdout_index])
    training_ids_path = write_ids(data_dir / "training_ids.txt", split.training_ids)

    reports, registrations, registration_versions = [], [], []
    for name, kind, alias in (("logistic-c1e4", "logistic", "champion"), ("mlp-64", "mlp", "challenger")):
        checkpoint = train_checkpoint(registry, split, name=name, estimator=make_estimator(kind, settings.drift.seed))
        print(f"{'reusing' if checkpoint.reused else 'trained'} checkpoint {name}: {checkpoint.uri}")
        step_started = time.perf_counter()
        registration = post_finetune(
            model_name=MODEL_NAME, checkpoint_uri=checkpoint.uri, train_steps=checkpoint.train_steps,
            train_data_version=f"sklearn-digits/train-{len(split.train_index)}-seed-{settings.drift.seed}",
            features_path=str(features_path), training_ids_path=str(training_ids_path), alias=alias, settings=settings,
        )
        registrations.append(registration.created)
        registration_versions.append(registration.version)
        reports.append(_report(registration, time.perf_counter() - step_started))

    print("\n" + "=" * 100)
    print("\n\n".join(reports))
    print("=" * 100)

    _monitor_story(settings, registry, split, {"champion": registration_versions[0],
                                               "challenger": registration_versions[1]})
    print("\nLoad a calibrated model:  mlflow.pyfunc.load_model('models:/digits@champion')  "
          f"with MLFLOW_TRACKING_URI={mask_url(settings.resolved_tracking_uri())}")
    print(f"Look at runs, versions, tags and the reliability diagrams (experiments '{settings.experiment_name}' "
          f"and '{settings.monitoring_experiment_name}'; the monitoring runs chart ece, nll, drift, ... over time):\n"
          f"  mlflow ui --backend-store-uri {mask_url(settings.resolved_tracking_uri())}")
    print(f"Prediction log (SQL, one row per served prediction): {mask_url(settings.resolved_prediction_log_url())}")
    if not any(created for created in registrations):
        print("This state folder already held the demo's checkpoints and their calibrated versions, so post-finetune "
              "registered nothing new (idempotent repeat); the monitor story ran on new traffic. Delete "
              f"{settings.state_dir} to start over.")
    print(f"Flow logs: {log_path}")
    print(f"Demo finished in {time.perf_counter() - started:.1f} s.")
    return 0


# ------------------------------------------------------------------------------ monitor story


def _undetermined(report: DriftReport) -> str:
    """The undetermined verdict with what would decide it."""
    rows = report.rows_to_decide
    decide = (f"about {rows:,} labelled rows would decide" if rows is not None
              else "the reference's own interval is too wide for any window to decide")
    return f"undetermined (no drift seen, calibration not established: {decide})"


def _check_line(check: VersionCheck) -> str:
    from flows.records.events import DRIFT_EVENT

    head = f"  {check.model_name} v{check.version} {' '.join('@' + a for a in check.aliases)} T={check.temperature:.4g}"
    report = check.report
    if report is None:
        return f"{head}: insufficient_data (no prediction logged)"
    label_shift = report.diagnosis is not None and report.diagnosis.kind == "label_shift"
    verdict = {"drift": "DRIFT" + (" -> refit recommended" if report.refit_recommended else
                                   " at the deployed posteriors, a label shift: no refit" if label_shift else
                                   " (in cool-down: no event)"),
               "calibrated": "calibrated", "undetermined": _undetermined(report),
               "insufficient_data": "insufficient_data"}[report.verdict]
    gate, window, policy = report.summary.gate, report.window, report.policy
    coverage = "n/a" if gate is None or gate.coverage != gate.coverage else f"{gate.coverage:.1%}"
    test = report.temperature_test
    fired = f" [{', '.join(report.tests_fired)}]" if report.tests_fired else ""
    temperature = "" if test is None else (
        f"\n      window T {test.window_temperature:.3f} [{test.window_temperature_low:.3f}, "
        f"{test.window_temperature_high:.3f}] vs reference {test.reference_temperature:.3f}: ratio {test.ratio:.3f}, "
        f"{test.direction}, z={test.z:+.2f}, p={test.p_value:.2g} (margin {policy.temperature_margin:.0%})"
    )
    ece = report.outcome("ece")
    ece_text = "ECE not tested" if ece is None or ece.refused is not None else (
        f"ECE {ece.metrics['ece_estimate']:.4f} [{ece.metrics['ece_low']:.4f}, {ece.metrics['ece_high']:.4f}] "
        f"(reference {report.baseline_ece:.4f}, tolerance {policy.ece_tolerance:.2f}; p={ece.p_value:.3g} vs "
        f"{ece.level:g})")
    line = (f"{head}: {verdict}{fired}\n      n={report.n}  {ece_text}  NLL {window.nll:.4f}  accuracy "
            f"{window.accuracy:.3f}  mean confidence {window.mean_confidence:.3f}  gate coverage {coverage}{temperature}")
    warning, sequential = report.early_warning, report.sequential
    if warning is not None and warning.n:
        shift = (f"confidences vs registration: {'SHIFTED ' + warning.direction if warning.shifted else 'unchanged'}, "
                 f"p={warning.p_value:.2g}" if warning.tested else "confidences not tested")
        line += (f"\n      before labels: predicted accuracy {warning.predicted_accuracy:.3f} "
                 f"[{warning.predicted_accuracy_low:.3f}, {warning.predicted_accuracy_high:.3f}] from "
                 f"{warning.n} served rows ({shift})")
    if sequential is not None:
        line += (f"; sequential CUSUM {sequential.upper:.1f} / {sequential.lower:.1f} of {sequential.threshold:g}"
                 + (" ALARM" if sequential.alarm else ""))
    diagnosis = report.diagnosis
    if diagnosis is not None and diagnosis.kind not in ("no_change", "undetermined"):  # the verdict says it
        moved = (f": class priors moved by {diagnosis.prior_shift:.3f} (total variation), p={diagnosis.prior_p_value:.2g}"
                 if diagnosis.priors_moved else "")
        line += f"\n      shift diagnosis: {diagnosis.kind.replace('_', ' ')} (fix: {diagnosis.fix.replace('_', ' ')}){moved}"
    if check.event_id is not None:
        line += f"\n      event {DRIFT_EVENT} emitted for mlmodel.{check.model_name}.v{check.version}"
    if report.in_cooldown and report.drift_detected and report.cooldown_until is not None:
        line += f"\n      cool-down until {report.cooldown_until.isoformat(timespec='seconds')} (an earlier drift event)"
    return line + f"\n      MLflow run {check.run_id}"


def _refit_line(outcome: RefitOutcome) -> str:
    from flows.records.events import REFIT_FAILED_EVENT

    head = f"  refit of {outcome.model_name} v{outcome.parent_version} @{outcome.alias} (T={outcome.parent_temperature:.4g})"
    r = outcome.registration
    if r is None:
        emitted = "" if outcome.event_id is None else f"; event {REFIT_FAILED_EVENT} emitted"
        text = f"{head}: {outcome.status.upper()} — nothing registered{emitted}"
    else:
        threshold = "none" if r.gate_threshold is None else f"{r.gate_threshold:.4f}"
        text = (f"{head}: {outcome.status.upper()} -> version {r.version}, T = {r.temperature:.4f}"
                f"{_interval_shown(outcome.interval)}, gate threshold "
                f"{threshold}, same checkpoint digest {r.checkpoint_digest[:12]}")
    if outcome.verification is not None:
        text += f"\n      {outcome.verification.summary}"
    reason = outcome.reason if len(outcome.reason) < 400 else outcome.reason[:400] + " ..."
    text += f"\n      {reason}"
    if outcome.escalation:
        text += f"\n      ESCALATION: {outcome.escalation}"
    return text


def _serve_phase(
    served: dict[str, ServedModel], log: PredictionLog, split: DigitsSplit, rng: np.random.Generator, *,
    token: str, phase: str, noise_sigma: float, class_share: tuple[int, float] | None = None,
) -> tuple[datetime, datetime]:
    """Serve one phase through the router (champion and challenger), then attach the labels.

    Returns the phase's window [start, end) of serving times.
    """
    start = datetime.now(UTC)
    rows = {"champion": CHAMPION_ROWS, "challenger": CHALLENGER_ROWS}
    traffic = {alias: digits_traffic(split, n, rng, noise_sigma=noise_sigma, class_share=class_share)
               for alias, n in rows.items()}
    # Batch by batch, the router alternates between the aliases; each batch is stamped with the
    # time it was served, so a phase spans real time and the rows of a window are ordered by it.
    for first in range(0, max(rows.values()), BATCH_ROWS):
        for alias, n in rows.items():
            if first >= n:
                continue
            batch = slice(first, min(first + BATCH_ROWS, n))
            features, labels = traffic[alias][0][batch], traffic[alias][1][batch]
            ids = [f"demo-{token}-{phase}-{alias}-{i:05d}" for i in range(batch.start, batch.stop)]
            served[alias].predict_and_log(features, ids, log, groups="camera" if alias == "champion" else "scanner")
            report = log.attach_labels(ids, labels)  # the labels arrive after the predictions were served
            if not report.complete:
                raise RuntimeError(f"labels of phase {phase} were not all attached: {report}")
    end = datetime.now(UTC) + timedelta(microseconds=1)
    return start, end


def _load_router(registry: MlflowRegistry, workdir: Path) -> dict[str, ServedModel]:
    from flows.registry.serving import ServedModel

    return {alias: ServedModel.load(f"models:/{MODEL_NAME}@{alias}", registry=registry, cache_dir=workdir / alias)
            for alias in ("champion", "challenger")}


def _monitor_story(
    settings: ThermostatSettings, registry: MlflowRegistry, split: DigitsSplit, registered: dict[str, str]
) -> None:
    from flows.pipelines.tasks import open_prediction_log

    print("\nMONITOR — a router serves traffic through both aliases; every prediction goes to the prediction log")
    _replay_from(registry, registered)
    token = uuid.uuid4().hex[:8]
    rng = np.random.default_rng(settings.drift.seed)
    log = open_prediction_log(settings)
    with tempfile.TemporaryDirectory(prefix="thermostat-demo-") as tmp:
        served = _load_router(registry, Path(tmp) / "a")
        phases = (("A", "in-distribution digits", 0.0), ("B", f"noisy digits (pixel noise sigma {NOISE_SIGMA})",
                                                          NOISE_SIGMA))
        checks: list[VersionCheck] = []
        for phase, description, sigma in phases:
            checks = _serve_and_check(served, log, split, rng, settings, token=token, phase=phase, noise_sigma=sigma,
                                      what=f"{description} — {CHAMPION_ROWS} requests @champion, {CHALLENGER_ROWS} "
                                           f"@challenger, labelled; ")
        # Phase B's checks: the drift event starts a refit (here in-process; deployed: the trigger).
        print()
        for check in checks:
            _refit_on_drift(check, settings)
        served = _load_router(registry, Path(tmp) / "c")
        _serve_and_check(served, log, split, rng, settings, token=token, phase="C", noise_sigma=NOISE_SIGMA,
                         what="fresh noisy digits through the (new) champion — ")
        _label_shift_episode(settings, registry, served, log, split, rng, token=token, workdir=Path(tmp))
    log.dispose()


def _label_shift_episode(
    settings: ThermostatSettings, registry: MlflowRegistry, served: dict[str, ServedModel], log: PredictionLog,
    split: DigitsSplit, rng: np.random.Generator, *, token: str, workdir: Path,
) -> None:
    """Phases D, E and F: a campaign makes one digit 40 % of the requests (a label shift: a prior
    correction, not a new T), then the mix returns (the correction is taken off), then the
    version without it is checked."""
    shifted = (SHIFTED_DIGIT, SHIFTED_SHARE)
    for phase, class_share, what in (
        ("D", shifted, f"a campaign: digit {SHIFTED_DIGIT} is now {SHIFTED_SHARE:.0%} of the (noisy) requests — "),
        ("E", None, "the campaign is over: the usual mix of noisy digits — "),
        ("F", None, "the usual mix through the champion as it now is — "),
    ):
        checks = _serve_and_check(served, log, split, rng, settings, token=token, phase=phase,
                                  noise_sigma=NOISE_SIGMA, what=what, class_share=class_share, shown="champion")
        corrected = [_correct_priors(check, settings) for check in checks if check.aliases[:1] == ("champion",)]
        if any(corrected):
            served = _load_router(registry, workdir / phase.lower())


def _correct_priors(check: VersionCheck, settings: ThermostatSettings) -> bool:
    """Register the prior correction a check's label shift asks for — or take a correction off once
    the mix is back — as the correct-priors deployment's trigger does on the label-shift event
    (here in-process); print the outcome; whether a version was registered."""
    from flows.pipelines.prior_correction import CorrectionFailed, correct_priors
    from flows.records.events import LABEL_SHIFT_EVENT

    report = check.report
    if report is None or report.diagnosis is None or report.prior_test is None:
        return False
    in_force = check.prior_correction is not None
    undo = in_force and not report.prior_test.fired
    if report.diagnosis.kind != "label_shift" and not undo:
        return False
    estimate = report.prior_test.estimate
    sent = LABEL_SHIFT_EVENT in dict(check.other_events)
    print(f"  v{check.version} @champion: " + (f"event {LABEL_SHIFT_EVENT} emitted" if sent else
          "label-shift event inside the cool-down of an earlier run's, so the demo starts the correction by hand")
          + (" (undo: the mix is back)" if undo else ""))
    started = time.perf_counter()
    try:
        outcome = correct_priors(model_name=MODEL_NAME, model_version=check.version, alias="champion",
                                 priors=[float(p) for p in estimate.priors],
                                 reference_priors=[float(p) for p in estimate.reference_priors], undo=undo,
                                 window_start=check.window_start, window_end=check.window_end, settings=settings)
    except CorrectionFailed as refused:
        outcome = refused.outcome
    what = ("the correction taken off: served as softmax(z / T) again" if outcome.correction is None else
            f"T unchanged, posteriors re-weighted to the traffic's priors (digit {SHIFTED_DIGIT}: "
            f"{outcome.correction.reference_priors[SHIFTED_DIGIT]:.2f} -> {outcome.correction.priors[SHIFTED_DIGIT]:.2f})")
    print(f"  prior correction of {MODEL_NAME} v{outcome.parent_version}: {outcome.status}"
          + (f", version {outcome.new_version} @champion — {what}" if outcome.new_version else f" — {outcome.reason}")
          + f"  ({time.perf_counter() - started:.1f} s)")
    return outcome.new_version is not None


def _replay_from(registry: MlflowRegistry, registered: dict[str, str]) -> None:
    """Point each alias back at the version this run's post-finetune registered (an earlier run's refit moved it)."""
    for alias, version in registered.items():
        holder = registry.alias_holder(MODEL_NAME, alias)
        if holder is not None and str(holder.version) != version:
            registry.set_alias(MODEL_NAME, alias, version)
            print(f"  rollback for the replay: {MODEL_NAME}@{alias} was version {holder.version} (a refit from an "
                  f"earlier demo run); it points at the post-finetune version {version} again")


def _serve_and_check(
    served: dict[str, ServedModel], log: PredictionLog, split: DigitsSplit, rng: np.random.Generator,
    settings: ThermostatSettings, *, token: str, phase: str, noise_sigma: float, what: str,
    class_share: tuple[int, float] | None = None, shown: str | None = None,
) -> list[VersionCheck]:
    """Serve one phase's traffic, check the window it made and print the checks (``what``: the
    traffic, in words; ``shown``: print only that alias's checks, the others' verdicts in a line)."""
    from flows.pipelines.monitor import monitor

    started = time.perf_counter()
    start, end = _serve_phase(served, log, split, rng, token=token, phase=phase, noise_sigma=noise_sigma,
                              class_share=class_share)
    # The window ends now (window_end not given): a check of the current window, which also
    # advances the sequential rule.
    checks = monitor(model_name=MODEL_NAME, window_start=start, settings=settings)
    end = checks[0].window_end if checks else end
    print(f"\nphase {phase}: {what}check of [{start.isoformat(timespec='milliseconds')}, "
          f"{end.isoformat(timespec='milliseconds')})  ({time.perf_counter() - started:.1f} s)")
    print("\n".join(_check_line(check) for check in checks if shown is None or shown in check.aliases))
    others = [f"v{c.version} @{c.aliases[0]}: {c.verdict}" for c in checks if shown is not None and shown not in c.aliases]
    if others:
        print(f"  (also checked, as before: {', '.join(others)})")
    return checks


def _refit_on_drift(check: VersionCheck, settings: ThermostatSettings) -> None:
    """Refit the version a check found drifting, as the drift event's trigger does (by hand in the
    cool-down of an earlier run's event for the champion), and print the outcome."""
    from flows.pipelines.refit import RefitFailed, refit

    if check.report is None or not check.report.drift_detected:
        return
    by_hand = not check.refit_recommended and check.aliases[:1] == ("champion",)
    if not check.refit_recommended and not by_hand:
        print(f"  v{check.version} @{check.aliases[0]}: drift inside the cool-down: no event, no refit")
        return
    if by_hand:
        print(f"  v{check.version} @champion is in the cool-down of an earlier run's drift event, so the "
              "monitor starts no refit; the demo starts it by hand (an operator's call)")
    started = time.perf_counter()
    try:
        # From the sequential rule's change point when it found the drift (the trigger does the same).
        start = check.window_start if check.report is None else check.report.refit_window_start
        outcome = refit(model_name=MODEL_NAME, model_version=check.version, alias=check.aliases[0],
                        window_start=start, window_end=check.window_end, settings=settings,
                        drift_event_id=check.event_id, drift_run_id=check.run_id)
    except RefitFailed as refused:  # nothing registered: its flow run ended Failed
        outcome = refused.outcome
    print(_refit_line(outcome) + f"  ({time.perf_counter() - started:.1f} s)")
