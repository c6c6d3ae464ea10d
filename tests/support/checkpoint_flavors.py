"""Checkpoints logged as users log them, one per flavor, on small synthetic data (no download).

Each builder saves an MLflow model into a folder and returns its holdout (features as the
checkpoint takes them, labels). Requirements are given explicitly: MLflow's inference of them
starts a subprocess that loads the model (tens of seconds on a busy machine).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

N_CLASSES = 3
N_TRAIN = 300
N_HOLDOUT = 720  # half fits T: at least 300 examples (the qualification's minimum), 30 per class
KEYWORDS = [[f"k{c}w{j}" for j in range(8)] for c in range(N_CLASSES)]
FILLER = [f"filler{j}" for j in range(20)]


@dataclass(frozen=True)
class Data:
    features: NDArray[Any]
    labels: NDArray[np.intp]

    def train(self) -> tuple[NDArray[Any], NDArray[np.intp]]:
        return self.features[:N_TRAIN], self.labels[:N_TRAIN]

    def holdout(self) -> tuple[NDArray[Any], NDArray[np.intp]]:
        return self.features[N_TRAIN:], self.labels[N_TRAIN:]


def numeric_data(seed: int = 0, dtype: Any = np.float64) -> Data:
    """Three overlapping Gaussian blobs in 4 dimensions (some errors: T is not pushed to a bound)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, N_CLASSES, N_TRAIN + N_HOLDOUT)
    centres = np.array([[0.0, 0.0, 0.0, 0.0], [1.6, 0.4, 0.0, -0.5], [0.3, 1.7, -0.6, 0.4]])
    features = centres[labels] + rng.normal(size=(labels.size, 4))
    return Data(features.astype(dtype), labels.astype(np.intp))


def text_data(seed: int = 0) -> Data:
    """Six-word texts: each word a keyword of the class (35 %), of another class (15 %) or filler."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, N_CLASSES, N_TRAIN + N_HOLDOUT)
    texts = []
    for label in labels:
        words = []
        for draw in rng.random(6):
            if draw < 0.35:
                words.append(KEYWORDS[label][rng.integers(8)])
            elif draw < 0.5:
                words.append(KEYWORDS[(label + rng.integers(1, N_CLASSES)) % N_CLASSES][rng.integers(8)])
            else:
                words.append(FILLER[rng.integers(20)])
        texts.append(" ".join(words))
    return Data(np.asarray(texts, dtype=str), labels.astype(np.intp))


def sklearn_numeric(path: Path, *, signature: bool, predict_fn: str = "predict_proba") -> Data:
    import mlflow.sklearn
    from mlflow.models import infer_signature
    from sklearn.linear_model import LogisticRegression

    data = numeric_data()
    x, y = data.train()
    model = LogisticRegression(max_iter=1000).fit(x, y)
    mlflow.sklearn.save_model(model, str(path), pyfunc_predict_fn=predict_fn, pip_requirements=["scikit-learn"],
                              signature=infer_signature(x, model.predict_proba(x)) if signature else None)
    return data


def sklearn_text(path: Path, *, signature: str | None, predict_fn: str = "predict_proba") -> Data:
    """A ``Pipeline(TfidfVectorizer, LogisticRegression)``; ``signature`` is inferred from the
    texts as a numpy ``"array"``, a ``"series"`` named ``text``, or absent (None)."""
    import mlflow.sklearn
    from mlflow.models import infer_signature
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    data = text_data()
    x, y = data.train()
    model = Pipeline([("tfidf", TfidfVectorizer()), ("classifier", LogisticRegression(max_iter=1000))]).fit(x, y)
    example = {"array": x, "series": pd.Series(x, name="text"), None: None}[signature]
    mlflow.sklearn.save_model(model, str(path), pyfunc_predict_fn=predict_fn, pip_requirements=["scikit-learn"],
                              signature=None if example is None else infer_signature(example, model.predict_proba(x)))
    return data


def pytorch_mlp(path: Path, *, signature: bool = True) -> Data:
    """A small MLP trained in float32, logged with ``mlflow.pytorch`` (its signature: float32 inputs)."""
    import mlflow.pytorch
    import torch

    data = numeric_data(dtype=np.float32)
    x, y = data.train()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, N_CLASSES))
    optimiser = torch.optim.Adam(net.parameters(), lr=0.05)
    inputs, targets = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    for _ in range(150):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(net(inputs), targets).backward()
        optimiser.step()
    net.eval()
    if signature:  # pt2 export traces the model on the example; the signature is inferred from it (float32)
        mlflow.pytorch.save_model(net, str(path), input_example=x[:5], pip_requirements=["torch"])
    else:
        mlflow.pytorch.save_model(net, str(path), serialization_format="pickle", pip_requirements=["torch"])
    return data


_HINTED_PYFUNC = '''
import mlflow
from mlflow.pyfunc import PythonModel

KEYWORDS = {keywords!r}


class KeywordScorer(PythonModel):
    """Logits from keyword counts; takes a list of strings (its type hint is its signature)."""

    def predict(self, model_input: list[str], params=None) -> list[list[float]]:
        rows = []
        for text in model_input:
            words = text.split()
            rows.append([1.3 * sum(word in words for word in keywords) - 0.1 * len(words) * c
                         for c, keywords in enumerate(KEYWORDS)])
        return rows


mlflow.models.set_model(KeywordScorer())
'''

_HF_STYLE_PYFUNC = '''
import json

import mlflow
import numpy as np
from mlflow.pyfunc import PythonModel


class TinyTextClassifier(PythonModel):
    """A Hugging-Face-style text classifier: a tokenizer (vocabulary file), an embedding bag and a
    classification head (weights file); predict takes a DataFrame with a "text" column and returns
    float32 logits, one row per text."""

    def load_context(self, context):
        with open(context.artifacts["vocab"]) as handle:
            self.vocab = json.load(handle)
        weights = np.load(context.artifacts["weights"])
        self.embedding, self.head, self.bias = weights["embedding"], weights["head"], weights["bias"]

    def predict(self, context, model_input, params=None):
        ids = [[self.vocab.get(word, 0) for word in text.lower().split()] for text in model_input["text"]]
        pooled = np.stack([self.embedding[row].mean(axis=0) for row in ids]).astype(np.float32)
        return pooled @ self.head + self.bias


mlflow.models.set_model(TinyTextClassifier())
'''


def pyfunc_hinted_text(path: Path) -> Data:
    """A custom pyfunc (model from code) with ``list[str]`` input: its signature comes from the type hint."""
    import mlflow.pyfunc

    code = path.parent / f"{path.name}_model.py"
    code.write_text(_HINTED_PYFUNC.format(keywords=KEYWORDS))
    mlflow.pyfunc.save_model(str(path), python_model=str(code), pip_requirements=["mlflow"])
    return text_data(1)


def hf_style_text(path: Path) -> Data:
    """A Hugging-Face-style pyfunc (model from code, vocabulary and weights as artifacts) with a named
    ``text`` column in its signature, returning float32 logits."""
    import mlflow.pyfunc
    from mlflow.models import infer_signature

    data = text_data(2)
    vocabulary = ["[UNK]", *FILLER, *(word for words in KEYWORDS for word in words)]
    rng = np.random.default_rng(3)
    embedding = rng.normal(scale=0.3, size=(len(vocabulary), 8)).astype(np.float32)
    for c, words in enumerate(KEYWORDS):  # class words point along their class's axis
        for word in words:
            embedding[vocabulary.index(word), c] += 2.0
    head = np.zeros((8, N_CLASSES), dtype=np.float32)
    head[np.arange(N_CLASSES), np.arange(N_CLASSES)] = 2.5
    folder = path.parent / f"{path.name}_artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps({word: i for i, word in enumerate(vocabulary)}))
    np.savez(folder / "weights.npz", embedding=embedding, head=head, bias=np.zeros(N_CLASSES, dtype=np.float32))
    code = path.parent / f"{path.name}_model.py"
    code.write_text(_HF_STYLE_PYFUNC)
    example = pd.DataFrame({"text": data.features[:5]})
    mlflow.pyfunc.save_model(
        str(path), python_model=str(code), pip_requirements=["mlflow", "numpy"],
        artifacts={"vocab": str(folder / "vocab.json"), "weights": str(folder / "weights.npz")},
        signature=infer_signature(example, np.zeros((5, N_CLASSES), dtype=np.float32)),
    )
    return data


_BATCH_NORMALISED_PYFUNC = '''
import mlflow
import numpy as np
from mlflow.pyfunc import PythonModel


class BatchNormalised(PythonModel):
    """Logits standardised over the batch: a row's answer depends on the other rows of its request."""

    def predict(self, context, model_input, params=None):
        x = np.asarray(model_input, dtype=np.float64)
        logits = np.stack([x[:, 0], x[:, 1], -x[:, 0] - x[:, 1]], axis=1)
        return (logits - logits.mean(axis=0)) / (logits.std(axis=0) + 1.0)


mlflow.models.set_model(BatchNormalised())
'''


def pyfunc_batch_normalised(path: Path) -> Data:
    """A custom pyfunc whose answers depend on the batch (a numpy signature): served one row per
    request it answers other logits than on the holdout at once."""
    import mlflow.pyfunc
    from mlflow.models import infer_signature

    data = numeric_data(4)
    code = path.parent / f"{path.name}_model.py"
    code.write_text(_BATCH_NORMALISED_PYFUNC)
    mlflow.pyfunc.save_model(str(path), python_model=str(code), pip_requirements=["mlflow", "numpy"],
                             signature=infer_signature(data.features[:5], np.zeros((5, N_CLASSES))))
    return data


Builder = Callable[[Path], Data]
