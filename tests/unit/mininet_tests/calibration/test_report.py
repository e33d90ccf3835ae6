"""What the exchange calibration records beside its constants
(mininet_tests.calibration.report): the command that wrote them and the commit it ran at."""

from __future__ import annotations

import json
import subprocess

from mininet_tests.calibration import report
from support.paths import REPO


def test_the_commit_is_the_checkouts_and_an_installed_copy_names_its_version(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert report.source_commit(REPO).removesuffix("+dirty") == head
    # a folder inside some other repository (site-packages in a project's checkout)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inside = tmp_path / "site-packages"
    inside.mkdir()
    got = report.source_commit(inside)
    assert got != head and "no git checkout" in got


def test_the_provenance_names_the_command_that_writes_it():
    m = {"rows": [{}], "started": "2026-01-01 00:00:00 UTC", "load_before": "0 0 0",
         "load_after": "1 1 1"}
    got = report.provenance_of(m, None, [0.01, 0.03], 0.5, "stored.json")
    assert got["command"] == "sluice calibrate exchange --write"
    assert (got["date"], got["refit_from"], got["points"]) == (m["started"], "stored.json", 2)
    assert got["worst_abs_residual_pct"] == 3.0


def test_json_output_goes_to_a_file_or_stdout(tmp_path, capsys):
    report.write_json(str(tmp_path / "o.json"), {"a": 1})
    assert json.loads((tmp_path / "o.json").read_text()) == {"a": 1}
    report.write_json("-", {"b": 2})
    assert json.loads(capsys.readouterr().out) == {"b": 2}
    report.write_json(None, {"c": 3})
    assert capsys.readouterr().out == ""
