"""ensure_mxnet: installs MXNet with --no-deps when missing, respects the opt-out, says how."""

import pytest

from ps_runtime.transport_install import (MXNET_PIN, OPT_OUT_ENV, TransportMissing,
                                          ensure_mxnet)


def test_present_transport_is_left_alone():
    calls = []
    assert ensure_mxnet(run=calls.append, present=lambda: True) is False
    assert calls == []


def test_missing_transport_is_installed_without_its_numpy_cap(monkeypatch):
    monkeypatch.delenv(OPT_OUT_ENV, raising=False)
    state = {"installed": False}
    commands, messages = [], []

    def run(cmd):
        commands.append(list(cmd))
        state["installed"] = True
        return 0

    assert ensure_mxnet(python="/venv/bin/python", run=run, announce=messages.append,
                        present=lambda: state["installed"]) is True
    assert commands == [["/venv/bin/python", "-m", "pip", "install", "--no-deps", MXNET_PIN]]
    assert "installing" in messages[0] and OPT_OUT_ENV in messages[0]


def test_opt_out_names_the_command_and_runs_nothing(monkeypatch):
    monkeypatch.setenv(OPT_OUT_ENV, "1")
    calls = []
    with pytest.raises(TransportMissing, match="--no-deps mxnet==1.9.1"):
        ensure_mxnet(run=calls.append, present=lambda: False)
    assert calls == []


def test_failed_pip_is_reported(monkeypatch):
    monkeypatch.delenv(OPT_OUT_ENV, raising=False)
    with pytest.raises(TransportMissing, match="installing MXNet failed"):
        ensure_mxnet(run=lambda cmd: 1, announce=lambda m: None, present=lambda: False)
