"""Every Slurm release sluice reads: the version read at start, and ``sinfo --json`` in
each release's layout (22.05 recorded; 23.02, 23.11, 24.05, 24.11 written from Slurm's
data-parser definitions, tests/data/slurm/versions/README.md). A release sluice does not
know is refused, naming it. No Slurm is needed here."""


import pytest

from slurm_client import SlurmClient, SlurmCommandError
from slurm_client.gres import gpus_by_type, gres_gpus, gres_request, is_mig
from slurm_client.nodes import ParseError, parse_sinfo_json
from slurm_client.versions import (LAYOUTS, SlurmVersion, UnsupportedSlurm, layout_for,
                                   parse_version_text, sinfo_argv, version_from_meta)
from support.paths import TEST_DATA

DATA = TEST_DATA / "slurm"
RELEASES = ["23.02", "23.11", "24.05", "24.11"]


def nodes_of(name: str) -> dict:
    return {n.name: n for n in parse_sinfo_json((DATA / name).read_text())}


@pytest.mark.parametrize("release", ["22.05", *RELEASES])
def test_every_supported_layout_gives_the_same_nodes(release):
    name = "sinfo.json" if release == "22.05" else f"versions/sinfo-{release}.json"
    nodes = nodes_of(name)
    assert set(nodes) == {"n1", "n2"}
    n1, n2 = nodes["n1"], nodes["n2"]
    assert (n1.gpus, n1.gpus_used, n1.usable, n1.state) == (4, 2, True, "MIXED")
    assert (n2.gpus, n2.gpus_used, n2.usable) == (4, 3, False)
    assert "DRAIN" in n2.flags and n2.reason == "disk check"
    if release != "22.05":
        assert n1.address == "10.0.0.1" and n1.cpus == 8 and n1.cpus_used == 3
        assert n1.memory_mb == 64000 and n1.memory_used_mb == 8000
        assert n1.partitions == ("main", "debug")   # listed once per partition: merged


def test_typed_gpus_and_mig_slices_are_counted_apart():
    n1 = nodes_of("versions/sinfo-24.11.json")["n1"]
    assert dict(n1.gpu_types) == {"a100": 4, "1g.5gb": 7}
    assert dict(n1.gpu_types_used) == {"a100": 2, "1g.5gb": 3}
    assert (n1.gpus, n1.gpus_used) == (4, 2)          # the slices are not whole GPUs
    assert n1.gpus_of("a100") == (4, 2)
    assert n1.gpus_of("1g.5gb") == (7, 3)
    assert n1.gpus_of("v100") == (0, 0)


@pytest.mark.parametrize("text, by_type", [
    ("gpu:4", {"": 4}), ("gpu:a100:8(S:0-1)", {"a100": 8}), ("gres/gpu:a100=2", {"a100": 2}),
    ("gpu:a100:2(IDX:0-1),gpu:1g.5gb:3(IDX:4-6),nic:1", {"a100": 2, "1g.5gb": 3}),
    ("gpu", {"": 1}), ("(null)", {}), ("gpu:nvidia_a100_3g.20gb:2", {"nvidia_a100_3g.20gb": 2})])
def test_gpus_by_type(text, by_type):
    assert gpus_by_type(text) == by_type


def test_mig_and_requests():
    assert is_mig("1g.5gb") and is_mig("nvidia_a100_3g.20gb") and not is_mig("a100")
    assert gres_gpus("gpu:a100:2,gpu:2g.10gb:3") == 2
    assert gres_gpus("gpu:a100:2,gpu:v100:1", "v100") == 1
    assert gres_request(2) == "gpu:2" and gres_request(2, "a100") == "gpu:a100:2"


@pytest.mark.parametrize("text, version", [
    ("slurm 22.05.8\n", SlurmVersion(22, 5, 8)), ("slurm-wlm 23.11.4", SlurmVersion(23, 11, 4)),
    ("slurm 24.11.0-0rc1", SlurmVersion(24, 11, 0))])
def test_version_text(text, version):
    assert parse_version_text(text) == version
    assert layout_for(version) is LAYOUTS[version.series]


def test_meta_versions():
    assert version_from_meta({"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}) \
        == SlurmVersion(22, 5, 8)
    assert version_from_meta({"slurm": {"version": {"major": "24", "minor": "11",
                                                    "micro": "7"}}}) == SlurmVersion(24, 11, 7)
    assert version_from_meta({"slurm": {"release": "23.02.1"}}) == SlurmVersion(23, 2, 1)
    with pytest.raises(ValueError):
        version_from_meta({"plugin": {}})


def test_unknown_release_is_refused_naming_it():
    with pytest.raises(UnsupportedSlurm, match=r"Slurm 25\.05\.3 is not supported.*22\.05"):
        parse_sinfo_json((DATA / "versions" / "sinfo-25.05.json").read_text())
    with pytest.raises(UnsupportedSlurm, match="21.08.5"):
        layout_for(parse_version_text("slurm 21.08.5"))


def test_layout_mismatch_and_garbage():
    text = (DATA / "versions" / "sinfo-23.11.json").read_text().replace('"sinfo"', '"nodes"', 1)
    with pytest.raises(ParseError, match="no 'sinfo' list"):
        parse_sinfo_json(text)
    for bad in ("not json", "{}", '{"meta": 3}'):
        with pytest.raises(ParseError):
            parse_sinfo_json(bad)


def test_sinfo_argv_per_release():
    assert sinfo_argv(SlurmVersion(22, 5, 8)) == ["sinfo", "--json"]
    assert sinfo_argv(SlurmVersion(24, 11, 1)) == ["sinfo", "--json", "--Node"]


class Scripted(SlurmClient):
    """A client whose commands print what a given release prints."""

    def __init__(self, version_text: str, sinfo: str):
        super().__init__()
        self.outputs = {"sinfo --version": version_text, "sinfo --json --Node": sinfo,
                        "sinfo --json": sinfo}
        self.ran: list[str] = []

    def run(self, argv, *, env=None, unset=()):
        self.ran.append(" ".join(argv))
        return self.outputs[" ".join(argv)]


def test_client_reads_the_version_once_and_uses_its_layout():
    client = Scripted("slurm 24.11.7\n", (DATA / "versions" / "sinfo-24.11.json").read_text())
    assert {n.name for n in client.nodes()} == {"n1", "n2"}
    client.nodes()
    assert client.ran == ["sinfo --version", "sinfo --json --Node", "sinfo --json --Node"]


def test_client_refuses_an_unknown_release_before_reading_nodes():
    client = Scripted("slurm 25.05.3\n", "{}")
    with pytest.raises(UnsupportedSlurm, match="25.05.3"):
        client.nodes()
    assert client.ran == ["sinfo --version"]
    with pytest.raises(SlurmCommandError):
        Scripted("no version here", "{}").version()
