"""The calibrated model served through MLflow's own scoring function, in process: what a JSON
request to ``mlflow models serve`` reaches, without starting a server (the HTTP matrix is
tests/integration/test_served_as_registered.py).

Regression tests of three ways a checkpoint logged as users log it was served other than
registered: a scikit-learn text pipeline without a signature answered every 1-row
``dataframe_split`` request with ``request_id`` the same (its column names were vectorised) and
refused n rows; a float32 PyTorch checkpoint refused every request (parsed as float64); a
checkpoint whose ``predict`` returns class labels was refused without naming the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd
import pytest
from mlflow.pyfunc.scoring_server import invocations
from scipy.special import softmax

from flows.registry.adapter import save_calibrated_model
from flows.registry.checkpoint import CheckpointFiles, checkpoint_logits
from flows.registry.model import request_fields
from tests.support import checkpoint_flavors as flavors

T = 1.7


def _served(root: Path, checkpoint: Path, output: str) -> Any:
    """The calibrated model as a registration saves it, loaded as the scoring server loads it."""
    save_calibrated_model(root / "calibrated", checkpoint_dir=checkpoint, n_classes=flavors.N_CLASSES,
                          model_config={"temperature": T, "gate_threshold": None, "checkpoint_output": output})
    return mlflow.pyfunc.load_model(str(root / "calibrated"), model_config={"log_predictions": False})


def _post(model: Any, body: dict[str, Any]) -> tuple[int, Any]:
    """``body`` through MLflow's scoring function (what ``/invocations`` runs): status and answer."""
    try:
        answer = invocations(json.dumps(body), "application/json", model, model.metadata.get_input_schema())
    except mlflow.exceptions.MlflowException as error:
        return error.get_http_status_code(), error.message
    return answer.status, json.loads(answer.response)["predictions"]


def _probabilities(predictions: list[dict[str, Any]]) -> np.ndarray:
    return np.array([[row[f"prob_{k}"] for k in range(flavors.N_CLASSES)] for row in predictions])


def test_a_text_pipeline_without_a_signature_answers_each_row_of_a_request_with_request_ids(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    data = flavors.sklearn_text(checkpoint, signature=None)
    texts, _ = data.holdout()
    own, output = checkpoint_logits(CheckpointFiles("text", checkpoint, ""), texts[:4])
    model = _served(tmp_path, checkpoint, output)
    answers = []
    for rows in ([0], [1], [2], [3], [0, 1, 2, 3]):
        status, predictions = _post(model, {"dataframe_split": {
            "columns": ["text", "request_id", "group"], "data": [[texts[i], f"r{i}", "web"] for i in rows]}})
        assert status == 200, predictions
        assert [row["request_id"] for row in predictions] == [f"r{i}" for i in rows]
        answers.append(_probabilities(predictions))
    expected = softmax(own / T, axis=1)
    np.testing.assert_allclose(np.vstack(answers[:4]), expected, rtol=0, atol=1e-12)  # 1 row at a time
    np.testing.assert_allclose(answers[4], expected, rtol=0, atol=1e-12)  # the same rows at once
    assert len({tuple(row) for row in np.round(expected, 6)}) > 1  # the rows really differ


def test_a_float32_pytorch_checkpoint_is_served_in_every_form(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    checkpoint = tmp_path / "checkpoint"
    features, _ = flavors.pytorch_mlp(checkpoint).holdout()
    rows = features[:3]
    own, output = checkpoint_logits(CheckpointFiles("torch", checkpoint, ""), rows)
    model = _served(tmp_path, checkpoint, output)
    params = {"request_id": ["a", "b", "c"], "group": ["web"]}
    for body in ({"inputs": rows.tolist()}, {"instances": rows.tolist()},
                 {"dataframe_split": {"columns": ["0", "1", "2", "3"], "data": rows.tolist()}},
                 {"dataframe_records": [dict(zip("0123", row, strict=True)) for row in rows.tolist()]}):
        status, predictions = _post(model, body | {"params": params})
        assert status == 200, (body, predictions)
        np.testing.assert_allclose(_probabilities(predictions), softmax(own / T, axis=1), rtol=0, atol=1e-9)
        assert [row["request_id"] for row in predictions] == ["a", "b", "c"]


def test_a_checkpoint_that_returns_class_labels_is_refused_naming_pyfunc_predict_fn(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    texts, _ = flavors.sklearn_text(checkpoint, signature=None, predict_fn="predict").holdout()
    with pytest.raises(ValueError, match=r"one value per example .*pyfunc_predict_fn='predict_proba'"):
        checkpoint_logits(CheckpointFiles("labels", checkpoint, ""), texts)


def test_request_fields_come_from_columns_or_params_never_both() -> None:
    frame = pd.DataFrame({"x": [1.0, 2.0], "request_id": ["a", "b"]})
    assert request_fields(frame, {"request_id": [], "group": ["web"]})[1:] == (["a", "b"], ["web"])
    with pytest.raises(mlflow.exceptions.MlflowException, match="both as an input column and in params"):
        request_fields(frame, {"request_id": ["c", "d"]})
    features, ids, groups = request_fields({"text": np.array(["t1"]), "request_id": np.array(["r1"])})
    assert list(features) == ["text"] and ids == ["r1"] and groups is None
