"""The `sluice` dispatcher: exit codes for missing/unknown commands and bad input."""

import pytest

from sluice.cli import main


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "commands:" in capsys.readouterr().err


def test_unknown_command_exits_2():
    with pytest.raises(SystemExit) as exit_:
        main(["no-such-command"])
    assert exit_.value.code == 2


def test_bad_input_is_one_line_naming_the_file_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "jobs.yaml"
    bad.write_text("jobs:\n  - {name: a, model: nosuchnet, dataset_size: 10, epochs: 1, "
                   "batch_size: 2, max_gpus: 1}\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "model" in err and "Traceback" not in err
