"""mask_url: a URL as it may be shown or stored (issue 9, defect 6; issue 19, items 12 and 13)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from monitoring import URL_MASK, holds_masked_credentials, mask_url, redact_credentials
from tests.strategies import generated_password


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
    ("url", "masked"),
    [
        # Generated passwords hold the characters that end a URL's parts: the credentials end at the last "@".
        ("postgresql://mlflow:p/w@db.internal:5432/mlflow", "postgresql://mlflow:***@db.internal:5432/mlflow"),
        ("postgresql+psycopg://t:a#b?c@db/t?sslmode=require", "postgresql+psycopg://t:***@db/t?sslmode=require"),
        ("postgresql://t:a:b/c@d@db/t", "postgresql://t:***@db/t"),
        ("https://alice:x/y?z#w@mlflow.internal/#/experiments/1", "https://alice:***@mlflow.internal/#/experiments/1"),
        ("http://alice:a@b/c@[::1]:5000/x", "http://alice:***@[::1]:5000/x"),
        # A token in the user part of a web URL is a secret too; a database URL's user name is not.
        ("https://ghp_T0KEN@mlflow.internal/", "https://***@mlflow.internal/"),
        ("https://T0KEN@mlflow.internal", "https://***@mlflow.internal"),
        ("postgresql://thermostat@db.internal/thermostat", "postgresql://thermostat@db.internal/thermostat"),
        ("postgresql://:pw@db/t", "postgresql://:***@db/t"),
    ],
)  # fmt: skip
def test_reserved_characters_and_tokens_are_masked(url: str, masked: str) -> None:
    assert mask_url(url) == masked
    assert mask_url(masked) == masked, "masking is idempotent"


@pytest.mark.parametrize(
    "url",
    ["sqlite:////srv/thermostat/mlflow.db", "sqlite:///relative.db", "https://mlflow.internal",
     "file:///srv/mlruns", "/srv/mlruns", "databricks", "sqlite:////srv/odd@name.db",
     "https://mlflow.internal/#/models/a@b", "https://mlflow.internal/x?email=a@b.example"],
)  # fmt: skip
def test_urls_without_a_password_are_unchanged(url: str) -> None:
    assert mask_url(url) == url


def test_database_urls_read_as_sqlalchemy_shows_its_engines() -> None:
    url = "postgresql+psycopg://thermostat:s3cret@db.internal:5432/thermostat"
    assert mask_url(url) == make_url(url).render_as_string(hide_password=True)


def test_an_unreadable_url_shows_nothing_of_its_password() -> None:
    masked = mask_url("http://alice:s3cret@[::1")
    assert "s3cret" not in masked and masked == "http://alice:***@[::1"


_SCHEMES = ("postgresql", "postgresql+psycopg", "mysql+pymysql", "http", "https")


@given(password=generated_password, scheme=st.sampled_from(_SCHEMES), encoded=st.booleans())
def test_a_generated_password_never_shows(password: str, scheme: str, encoded: bool) -> None:
    """Whatever the password holds, raw or percent-encoded, the masked URL does not contain it."""
    secret = quote(password, safe="") if encoded else password
    url = f"{scheme}://svc_user:{secret}@db.internal:5432/store?sslmode=require"
    masked = mask_url(url)
    assume(password not in f"{scheme}://svc_user:***@db.internal:5432/store?sslmode=require")
    assert password not in masked and secret not in masked
    assert masked == f"{scheme}://svc_user:***@db.internal:5432/store?sslmode=require"
    assert holds_masked_credentials(masked) and not holds_masked_credentials(url)
    if scheme.startswith(("postgresql", "mysql")):  # what the connecting parser reads as the password is hidden
        assert make_url(masked).password in (None, URL_MASK)


@given(token=generated_password.filter(lambda t: not set(t) & set("/?#@:")))
def test_a_generated_token_in_the_user_part_never_shows(token: str) -> None:
    url = f"https://{token}@mlflow.internal/api"
    assume(token not in "https://***@mlflow.internal/api")
    assert mask_url(url) == "https://***@mlflow.internal/api"
    assert holds_masked_credentials(mask_url(url))


@pytest.mark.parametrize(
    ("url", "masked"),
    [("https://alice:***@h/", True), ("https://***@h/", True), ("postgresql://h/db?password=***", True),
     ("https://alice:s3cret@h/", False), ("postgresql://u@h/db", False), ("sqlite:///***.db", False)],
)  # fmt: skip
def test_holds_masked_credentials(url: str, masked: bool) -> None:
    assert holds_masked_credentials(url) is masked


def test_redact_credentials_takes_the_password_out_of_any_text() -> None:
    url = "postgresql://postgres:pa ss/w%zz@db.internal/postgres"
    text = ('invalid percent-encoded token: "pa ss/w%zz" in postgresql://postgres:pa ss/w%zz@db.internal/postgres; '
            "decoded pa ss/w%zz, encoded pa%20ss%2Fw%25zz")
    redacted = redact_credentials(text, url)
    assert "pa ss" not in redacted and "%2Fw" not in redacted
    assert redacted.startswith('invalid percent-encoded token: "***" in postgresql://postgres:***@db.internal/')
    assert redact_credentials("nothing secret here", "postgresql://u@h/db") == "nothing secret here"
