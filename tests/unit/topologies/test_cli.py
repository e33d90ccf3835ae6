"""topologies.cli: ``sluice topology list`` names the built-ins, ``check`` reports a
fabric's oversubscription."""

import json

from sluice.cli import main


def test_list_names_the_oversubscribed_and_tiresias_fabrics(capsys):
    assert main(["topology", "list"]) == 0
    names = capsys.readouterr().out.split()
    assert {"cluster-2k", "cluster-2k-2to1", "cluster-2k-4to1", "two-rack-64"} <= set(names)


def test_check_reports_each_racks_oversubscription(capsys):
    for name, ratio, gpus in [("cluster-2k-2to1", 2.0, 2048), ("cluster-2k-4to1", 4.0, 2048),
                              ("two-rack-64", 4.0, 64)]:
        assert main(["topology", "check", name, "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["gpus"] == gpus and set(summary["oversubscription"].values()) == {ratio}
