"""``sluice submit``, ``jobs`` and ``cancel`` build their client from the two values they
need (``--server``, ``--token``), falling back to the environment; a bad URL is bad input
naming ``--server`` (exit 2), with nothing sent."""

from __future__ import annotations

import pytest

from job_scheduler.service.cli import _client
from job_scheduler.service.client import DEFAULT_URL, TOKEN_ENV, URL_ENV
from sluice.cli import main
from sluice_common.errors import InputError


def test_the_client_takes_the_given_server_and_token(monkeypatch):
    monkeypatch.setenv(URL_ENV, "http://env-host:1")
    monkeypatch.setenv(TOKEN_ENV, "env-token")
    client = _client("http://given:2", "given-token")
    assert (client.url, client.token) == ("http://given:2", "given-token")


def test_the_client_falls_back_to_the_environment_then_the_default(monkeypatch):
    monkeypatch.setenv(URL_ENV, "http://env-host:1")
    monkeypatch.setenv(TOKEN_ENV, "env-token")
    assert (_client(None).url, _client(None).token) == ("http://env-host:1", "env-token")
    monkeypatch.delenv(URL_ENV)
    monkeypatch.delenv(TOKEN_ENV)
    assert (_client(None).url, _client(None).token) == (DEFAULT_URL, None)


def test_a_bad_server_url_names_the_flag(capsys):
    with pytest.raises(InputError, match="scheduler URL must look like"):
        _client("ftp://x")
    assert main(["jobs", "--server", "ftp://x"]) == 2
    assert main(["cancel", "3", "--server", "ftp://x", "--token", "t"]) == 2
    err = capsys.readouterr().err
    assert err.count("--server") == 2 and "ftp://x" in err, err
