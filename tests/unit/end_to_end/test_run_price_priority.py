"""``sluice run --price-priority RULE``: the RunConfig field, checked
as the other commands check it (the sluice policy only, a known rule), handed to the
policy of the run, its dry run and its estimate."""

import pytest

from end_to_end.run import RunConfig
from sluice.cli import main
from sluice_common.errors import InputError

JOBS = "jobs:\n  - {name: a, model: smallcnn, dataset_size: 64, epochs: 1, batch_size: 32, max_gpus: 2}\n"


def test_the_field_reaches_the_policy_and_is_off_by_default():
    config = RunConfig(jobs="j.yaml", topology="two-rack", policy="sluice",
                       price_priority="remaining")
    assert config.make_policy().price_priority == "remaining"
    assert RunConfig(jobs="j.yaml", topology="two-rack", policy="sluice").make_policy() \
        .price_priority is None


@pytest.mark.parametrize("policy, rule, says", [
    ("lyapunov", "remaining", "policy 'lyapunov' does not price placements"),
    ("sluice", "fastest", "unknown rule 'fastest'"),
])
def test_the_field_refuses_a_policy_that_does_not_price_or_an_unknown_rule(policy, rule, says):
    with pytest.raises(InputError) as err:
        RunConfig(jobs="j.yaml", topology="two-rack", policy=policy, price_priority=rule)
    assert err.value.field == "price_priority" and says in str(err.value)


@pytest.mark.parametrize("extra, says", [
    (["--policy", "lyapunov", "--price-priority", "remaining"],
     "argument --price-priority: policy 'lyapunov' does not price placements"),
    (["--price-priority", "remaining"],                   # the default policy: lyapunov
     "argument --price-priority: policy 'lyapunov' does not price placements"),
    (["--policy", "sluice", "--price-priority", "fastest"],
     "argument --price-priority: unknown rule 'fastest'"),
])
def test_bad_price_priority_exits_2_naming_the_flag_and_starts_nothing(tmp_path, capsys,
                                                                      extra, says):
    jobs, out = tmp_path / "jobs.yaml", tmp_path / "out"
    jobs.write_text(JOBS)
    try:
        code = main(["run", str(jobs), "--out", str(out), *extra])
    except SystemExit as err:          # argparse's own (the flag's type): SystemExit(2)
        code = err.code
    assert code == 2
    assert says in capsys.readouterr().err
    assert not out.exists()


def test_the_dry_run_prices_with_the_rule(tmp_path, capsys):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    assert main(["run", str(jobs), "--policy", "sluice", "--price-priority", "attained",
                 "--dry-run"]) == 0
    assert "policy sluice (placements priced with the attained rule)" in capsys.readouterr().out
