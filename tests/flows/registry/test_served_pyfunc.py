"""The calibrated pyfunc as a server loads it: response columns, request ids, and the prediction
log it feeds (batched, in order, with its version and T; a dead log never fails a prediction).

The model is saved exactly as a registration saves it (:func:`flows.registry.adapter.save_calibrated_model`)
around a small scikit-learn checkpoint, and loaded with ``mlflow.pyfunc.load_model``; its
registered name and version come from ``model_config`` (as ``MlflowRegistry.load_version_model``
sets them) or from the ``registered_model_meta`` file of a ``models:/`` download.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import mlflow.sklearn
import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from mlflow.models import ModelSignature, infer_signature
from mlflow.types import ColSpec, Schema, TensorSpec
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from flows.registry.model import LOG_URL_VARIABLE, REGISTERED_MODEL_META, calibrated_frame
from flows.registry.adapter import calibrated_signature, save_calibrated_model
from flows.registry.serving import ServedModel
from monitoring import PredictionLog
from tests.monitoring.conftest import PostgresCluster
from tests.monitoring.conftest import postgres_cluster, postgres_server, postgres_url  # noqa: F401 - session fixtures
from tests.support.ports import free_port

T = 1.8
THRESHOLD = 0.9
IDENTITY = {"registered_model_name": "digits", "registered_model_version": "5"}


def _save(root: Path, x: Any, y: Any) -> Path:
    estimator = LogisticRegression(max_iter=500).fit(x, y)
    mlflow.sklearn.save_model(estimator, str(root / "checkpoint"), pyfunc_predict_fn="predict_log_proba",
                              signature=infer_signature(x[:5], estimator.predict_log_proba(x[:5])))
    save_calibrated_model(root / "calibrated", checkpoint_dir=root / "checkpoint", n_classes=10,
                          model_config={"temperature": T, "gate_threshold": THRESHOLD, "checkpoint_output": "logits"})
    return root / "calibrated"


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    return x, y


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, digits: tuple[np.ndarray, np.ndarray]) -> Path:
    """Tensor inputs (a numpy checkpoint): no input schema at the calibrated level."""
    x, y = digits
    return _save(tmp_path_factory.mktemp("tensor"), x[:400], y[:400])


@pytest.fixture(scope="module")
def named_model_dir(tmp_path_factory: pytest.TempPathFactory, digits: tuple[np.ndarray, np.ndarray]) -> Path:
    """Named input columns (a DataFrame checkpoint): checked by MLflow, request columns optional."""
    x, y = digits
    frame = pd.DataFrame(x[:400], columns=[f"px{j}" for j in range(64)])
    return _save(tmp_path_factory.mktemp("named"), frame, y[:400])


@pytest.fixture
def log_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    monkeypatch.setenv(LOG_URL_VARIABLE, url)
    return url


def _load(path: Path, **config: Any) -> Any:
    return mlflow.pyfunc.load_model(str(path), model_config=config or None)


def _rows(url: str) -> list[Any]:
    with PredictionLog(url) as log:
        table = log.table
        with log.engine.connect() as conn:
            return list(conn.execute(table.select().order_by(table.c.id)).all())


def _checkpoint_logits(model_dir: Path, features: Any) -> np.ndarray:
    checkpoint = mlflow.pyfunc.load_model(str(model_dir / "artifacts" / "checkpoint"))
    return np.asarray(checkpoint.predict(features), dtype=np.float64)


def _unreachable_url() -> str:
    return f"postgresql+psycopg://thermostat@127.0.0.1:{free_port()}/log"  # a port nothing listens on


def test_the_response_carries_request_ids_version_and_temperature(
    model_dir: Path, digits: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LOG_URL_VARIABLE, raising=False)
    x, _ = digits
    model = _load(model_dir, **IDENTITY)
    frame = model.predict(x[500:506])
    expected = calibrated_frame(_checkpoint_logits(model_dir, x[500:506]), T, THRESHOLD)
    pd.testing.assert_frame_equal(frame.iloc[:, : expected.shape[1]], expected)  # the calibrated columns, unchanged
    assert list(frame.columns[expected.shape[1]:]) == ["request_id", "model_version", "temperature"]
    assert (frame["model_version"] == "5").all() and (frame["temperature"] == T).all()
    ids = frame["request_id"].tolist()
    assert len(set(ids)) == 6 and all(str(uuid.UUID(rid)) == rid for rid in ids)  # generated uuid4s

    # A tensor checkpoint: the request fields travel as params (a DataFrame of floats has no room for them).
    answered = model.predict(x[500:503], params={"request_id": ["a", "b", "c"], "group": ["web", "web", "app"]})
    assert answered["request_id"].tolist() == ["a", "b", "c"]
    pd.testing.assert_frame_equal(answered.iloc[:, : expected.shape[1]], expected.iloc[:3])
    assert model.unwrap_python_model().prediction_log_stats is None  # no log configured


CORRECTION = {"priors": [0.4] + [0.6 / 9] * 9, "reference_priors": [0.1] * 10}


def test_a_prior_correction_reweights_the_served_probabilities_in_log_space(
    tmp_path: Path, digits: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The served probabilities are softmax(z / T) re-weighted by priors / reference_priors and
    renormalised: calibration's prior_corrected_log_probabilities, to 1e-12; the class follows them."""
    from calibration import prior_corrected_log_probabilities

    monkeypatch.delenv(LOG_URL_VARIABLE, raising=False)
    x, y = digits
    plain = _save(tmp_path / "plain", x[:400], y[:400])
    corrected_dir = tmp_path / "corrected"
    save_calibrated_model(corrected_dir, checkpoint_dir=plain / "artifacts" / "checkpoint", n_classes=10,
                          model_config={"temperature": T, "gate_threshold": THRESHOLD, "checkpoint_output": "logits",
                                        "prior_correction": CORRECTION})
    features = x[500:800]
    logits = _checkpoint_logits(plain, features)
    frame = _load(corrected_dir, **IDENTITY).predict(features)
    expected = np.exp(prior_corrected_log_probabilities(logits, temperature=T, **CORRECTION))
    served = frame[[f"prob_{k}" for k in range(10)]].to_numpy()
    np.testing.assert_allclose(served, expected, rtol=0, atol=1e-12)
    assert (frame["class"] == expected.argmax(axis=1)).all()
    assert (frame["class"] != logits.argmax(axis=1)).any()  # class 0 at 40 %: some rows change class
    np.testing.assert_allclose(frame["confidence"], expected.max(axis=1), rtol=0, atol=1e-12)
    assert ((frame["decision"] == "auto") == (expected.max(axis=1) >= THRESHOLD)).all()
    # Without a correction (None) the same checkpoint serves softmax(z / T) as before.
    uncorrected = _load(plain, **IDENTITY).predict(features)[[f"prob_{k}" for k in range(10)]].to_numpy()
    assert np.abs(uncorrected - expected).max() > 0.05


@pytest.mark.parametrize(
    ("correction", "message"),
    [
        ({"priors": [0.5, 0.5]}, "must be None or"),
        ({"priors": [0.5, 0.5], "reference_priors": [1.0, 0.0]}, "every prior must be finite and > 0"),
        ({"priors": [0.5, 0.5], "reference_priors": [0.2, 0.3, 0.5]}, "two lists of one prior per class"),
    ],
)
def test_a_malformed_prior_correction_is_refused_at_load(correction: dict[str, Any], message: str) -> None:
    from flows.registry.model import parse_prior_correction

    with pytest.raises(ValueError, match=message):
        parse_prior_correction(correction)


def test_the_version_comes_from_a_models_uri_download(model_dir: Path, tmp_path: Path,
                                                      digits: tuple[np.ndarray, np.ndarray]) -> None:
    import shutil

    copy = tmp_path / "downloaded"
    shutil.copytree(model_dir, copy)
    # What MLflow's ModelsArtifactRepository writes beside MLmodel for models:/digits@champion -> version 9.
    (copy / REGISTERED_MODEL_META).write_text("model_name: digits\nmodel_version: '9'\n")
    assert set(_load(copy).predict(digits[0][:2])["model_version"]) == {"9"}
    assert set(_load(model_dir).predict(digits[0][:2])["model_version"]) == {None}  # a path: unknown


def test_every_prediction_is_logged_in_batches_in_order_with_version_and_t(
    model_dir: Path, digits: tuple[np.ndarray, np.ndarray], log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THERMOSTAT_SERVING_LOG_BATCH_ROWS", "7")
    monkeypatch.setenv("THERMOSTAT_SERVING_LOG_FLUSH_MS", "600000")
    x, _ = digits
    model = _load(model_dir, **IDENTITY)
    served = model.unwrap_python_model()
    frames, groups, start = [], [], 500
    for i in range(25):
        n = 1 + i % 3
        rows = x[start : start + n]
        if i % 2:
            frames.append(model.predict(rows, params={"request_id": [f"q{i}-{j}" for j in range(n)],
                                                      "group": [f"g{i % 4}"]}))
            groups += [f"g{i % 4}"] * n
        else:
            frames.append(model.predict(rows))
            groups += [None] * n
        start += n
    total = start - 500
    assert served.flush_prediction_log()
    stats = served.prediction_log_stats
    assert (stats.rows_submitted, stats.rows_written, stats.rows_dropped) == (total, total, 0)
    assert stats.batches_written >= -(-total // 7)  # never more than 7 rows in one write

    response = pd.concat(frames, ignore_index=True)
    stored = _rows(log_url)
    assert [row.request_id for row in stored] == response["request_id"].tolist()  # every row, in order served
    assert {(row.model_name, row.model_version, row.temperature) for row in stored} == {("digits", "5", T)}
    assert [row.group_key for row in stored] == groups
    assert [row.predicted_class for row in stored] == response["class"].tolist()
    np.testing.assert_allclose([row.confidence for row in stored], response["confidence"], rtol=1e-6)
    logits = np.frombuffer(b"".join(row.logits for row in stored), dtype="<f4").reshape(total, 10)
    np.testing.assert_array_equal(logits, _checkpoint_logits(model_dir, x[500 : 500 + total]).astype(np.float32))
    served.close_prediction_log()


def test_a_dead_prediction_log_never_fails_a_prediction_and_the_loss_is_counted(
    model_dir: Path, digits: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(LOG_URL_VARIABLE, _unreachable_url())
    monkeypatch.setenv("THERMOSTAT_SERVING_LOG_BATCH_ROWS", "4")
    x, _ = digits
    model = _load(model_dir, **IDENTITY)
    served = model.unwrap_python_model()
    with caplog.at_level(logging.WARNING, logger="thermostat.serving"):
        frames = [model.predict(x[500 + 2 * i : 502 + 2 * i]) for i in range(6)]
        assert served.flush_prediction_log()
    expected = calibrated_frame(_checkpoint_logits(model_dir, x[500:512]), T, THRESHOLD)
    pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True).iloc[:, : expected.shape[1]], expected)
    stats = served.prediction_log_stats
    assert (stats.rows_submitted, stats.rows_written, stats.rows_dropped) == (12, 0, 12)
    assert stats.last_error is not None and "OperationalError" in stats.last_error
    assert "not logged" in caplog.text and "OperationalError" in caplog.text
    served.close_prediction_log()


@pytest.mark.integration
def test_the_in_process_helper_and_the_pyfunc_answer_while_the_database_is_down_and_log_again_after_its_restart(
    model_dir: Path, digits: tuple[np.ndarray, np.ndarray], postgres_cluster: PostgresCluster,  # noqa: F811
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,  # noqa: F811
) -> None:
    """A real PostgreSQL stopped and started again under both ways of serving (issue 19): before,
    ``ServedModel.predict_and_log`` raised on every request while the database was down, unlike the
    pyfunc's writer, which answers and counts the loss; and after a restart with no request in between
    both lost their first write to the pool's dead connections. Both answer, count the same losses,
    and log again."""
    monkeypatch.setenv(LOG_URL_VARIABLE, postgres_url)
    monkeypatch.setenv("THERMOSTAT_SERVING_LOG_FLUSH_MS", "600000")  # a batch is written at flush
    x, _ = digits
    log = PredictionLog(postgres_url)
    log.metadata.drop_all(log.engine)
    log.create()
    pyfunc = _load(model_dir, **IDENTITY)  # logs what it serves, from its writer thread
    writer = pyfunc.unwrap_python_model()
    quiet = _load(model_dir, **IDENTITY, log_predictions=False)  # as ServedModel.load loads a version
    served = ServedModel(model_name="digits", version="5", alias=None, model=quiet,
                         calibrated=quiet.unwrap_python_model())
    answers: list[pd.DataFrame] = []

    def serve(phase: str, i: int) -> None:
        rows = x[500 + 4 * i : 504 + 4 * i]
        ids = [f"{phase}-{i}-{j}" for j in range(4)]
        answers.append(served.predict_and_log(rows, [f"in-process-{rid}" for rid in ids], log, groups="web"))
        answers.append(pyfunc.predict(rows, params={"request_id": [f"pyfunc-{rid}" for rid in ids]}))
        writer.flush_prediction_log()

    try:
        with caplog.at_level(logging.WARNING, logger="thermostat.serving"):
            serve("up", 0)
            with postgres_cluster.stopped():
                for i in range(1, 4):
                    serve("down", i)
            serve("again", 4)
            with postgres_cluster.stopped():
                pass  # restarted with no request in between: every pooled connection is dead
            serve("restarted", 5)
        expected = calibrated_frame(_checkpoint_logits(model_dir, x[500:524]), T, THRESHOLD)
        for i in range(6):  # every request was answered, the same by both
            for answer in answers[2 * i : 2 * i + 2]:
                pd.testing.assert_frame_equal(answer.iloc[:, : expected.shape[1]],
                                              expected.iloc[4 * i : 4 * i + 4].reset_index(drop=True))
        served.close_prediction_log()
        log.dispose()  # this test's own connection died with the restarts (the writers write through their own)
        with log.engine.connect() as conn:
            stored = set(conn.execute(sa.select(log.table.c.request_id)).scalars())
        assert stored == {f"{way}-{phase}-{i}-{j}" for way in ("in-process", "pyfunc")
                          for phase, i in (("up", 0), ("again", 4), ("restarted", 5)) for j in range(4)}  # fmt: skip
        for stats in (served.prediction_log_stats, writer.prediction_log_stats):
            assert (stats.rows_submitted, stats.rows_written, stats.rows_dropped, stats.loss_events) == (24, 12, 12, 3)
            assert stats.last_error is not None and "OperationalError" in stats.last_error
        assert caplog.text.count("row(s) not logged") == 2, "the first loss of each is a warning"
    finally:
        writer.close_prediction_log()
        log.metadata.drop_all(log.engine)
        log.dispose()


def test_logging_asked_for_without_a_known_version_serves_and_counts_every_row(
    model_dir: Path, digits: tuple[np.ndarray, np.ndarray], log_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="thermostat.serving"):
        model = _load(model_dir)  # a path: no registered version to log under
        assert len(model.predict(digits[0][:3])) == 3
        stats = model.unwrap_python_model().prediction_log_stats
        assert stats["rows_dropped"] == 3 and "name and version of this model are unknown" in stats["last_error"]
        model.unwrap_python_model().close_prediction_log()
    assert "predictions are NOT logged" in caplog.text and "3 row(s) lost" in caplog.text


def test_log_predictions_false_turns_logging_off(
    model_dir: Path, digits: tuple[np.ndarray, np.ndarray], log_url: str, tmp_path: Path
) -> None:
    model = _load(model_dir, **IDENTITY, log_predictions=False)  # as Thermostat's own loads do
    model.predict(digits[0][:3])
    assert model.unwrap_python_model().prediction_log_stats is None
    assert not (tmp_path / "predictions.db").exists()


def test_named_input_columns_pass_request_id_and_group_through_mlflow_checks(
    named_model_dir: Path, digits: tuple[np.ndarray, np.ndarray], log_url: str
) -> None:
    x, _ = digits
    model = _load(named_model_dir, **IDENTITY)
    request = pd.DataFrame(x[500:503], columns=[f"px{j}" for j in range(64)]).assign(
        request_id=["n1", "n2", "n3"], group=["web", "web", "app"])
    assert model.predict(request)["request_id"].tolist() == ["n1", "n2", "n3"]
    features_only = pd.DataFrame(x[503:505], columns=[f"px{j}" for j in range(64)])
    assert len(model.predict(features_only)) == 2  # the two columns are optional
    served = model.unwrap_python_model()
    served.flush_prediction_log()
    assert [(row.request_id, row.group_key) for row in _rows(log_url)][:3] == [
        ("n1", "web"), ("n2", "web"), ("n3", "app")]
    served.close_prediction_log()


def test_the_calibrated_signature() -> None:
    named = ModelSignature(inputs=Schema([ColSpec("double", "a"), ColSpec("double", "b")]))
    signature = calibrated_signature(named, 3)
    assert signature.inputs is not None
    assert signature.inputs.input_names() == ["a", "b", "request_id", "group"]
    assert signature.inputs.optional_input_names() == ["request_id", "group"]
    assert signature.outputs is not None and signature.outputs.input_names()[-3:] == [
        "request_id", "model_version", "temperature"]
    tensor = ModelSignature(inputs=Schema([TensorSpec(np.dtype("float32"), (-1, 4))]))
    assert calibrated_signature(tensor, 3).inputs == tensor.inputs  # MLflow parses a request to float32
    assert calibrated_signature(tensor, 3).params is not None
    assert [p.name for p in calibrated_signature(tensor, 3).params.params] == ["request_id", "group"]
    assert calibrated_signature(ModelSignature(inputs=Schema([ColSpec("string")])), 3).inputs is None
    with pytest.raises(ValueError, match="named tensors"):
        calibrated_signature(ModelSignature(inputs=Schema([TensorSpec(np.dtype("float32"), (-1, 4), "x")])), 3)
    with pytest.raises(ValueError, match=r"\['group'\]"):
        calibrated_signature(ModelSignature(inputs=Schema([ColSpec("string", "group")])), 3)


def test_sigterm_writes_what_is_queued_before_the_process_ends(model_dir: Path, tmp_path: Path) -> None:
    """The default SIGTERM ends a process without atexit; the pyfunc drains its queue first."""
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    script = (
        "import os, signal, numpy as np, mlflow.pyfunc\n"
        f"model = mlflow.pyfunc.load_model({str(model_dir)!r}, model_config={IDENTITY!r})\n"
        "model.predict(np.zeros((5, 64)))\n"
        "assert model.unwrap_python_model().prediction_log_stats.rows_written == 0\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "import time; time.sleep(30)\n"
    )
    env = os.environ | {LOG_URL_VARIABLE: url, "THERMOSTAT_SERVING_LOG_FLUSH_MS": "600000"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -15, done.stderr[-2000:]  # killed by SIGTERM, as before
    assert "draining (the server is stopping): 5 row(s) written, 0 lost, 0 pending" in done.stderr
    assert len(_rows(url)) == 5
