"""mask_url: a URL as it may be shown or stored (issue 9, defect 6)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from monitoring import mask_url


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://alice:s3cret@mlflow.internal/#/experiments/1/runs/abc",
         "https://alice:***@mlflow.internal/#/experiments/1/runs/abc"),
        ("http://alice:s3cret@127.0.0.1:5000", "http://alice:***@127.0.0.1:5000"),
        ("http://u:p%40ss@[::1]:5000/x?token=abc#frag", "http://u:***@[::1]:5000/x?token=***#frag"),
        ("postgresql+psycopg://thermostat:pw@db.internal:5432/thermostat?sslmode=require",
         "postgresql+psycopg://thermostat:***@db.internal:5432/thermostat?sslmode=require"),
        ("postgresql://db.internal/mlflow?user=u&password=pw", "postgresql://db.internal/mlflow?user=u&password=***"),
        ("postgresql://u:p@ss@db.internal/mlflow", "postgresql://u:***@db.internal/mlflow"),  # a raw "@" in it
        ("postgresql://u:pw@h1:5432,h2:5433/db", "postgresql://u:***@h1:5432,h2:5433/db"),  # libpq multi-host
        ("mysql+pymysql://a:b@h/d", "mysql+pymysql://a:***@h/d"),
    ],
)  # fmt: skip
def test_passwords_are_masked_and_the_rest_kept(url: str, masked: str) -> None:
    assert mask_url(url) == masked
    assert mask_url(masked) == masked, "masking is idempotent"


@pytest.mark.parametrize(
    "url",
    ["sqlite:////srv/thermostat/mlflow.db", "sqlite:///relative.db", "https://mlflow.internal", "https://token@host/",
     "file:///srv/mlruns", "/srv/mlruns", "databricks"],
)  # fmt: skip
def test_urls_without_a_password_are_unchanged(url: str) -> None:
    assert mask_url(url) == url


def test_database_urls_read_as_sqlalchemy_shows_its_engines() -> None:
    url = "postgresql+psycopg://thermostat:s3cret@db.internal:5432/thermostat"
    assert mask_url(url) == make_url(url).render_as_string(hide_password=True)


def test_an_unreadable_url_shows_nothing_of_itself() -> None:
    assert mask_url("http://alice:s3cret@[::1") == "***"
