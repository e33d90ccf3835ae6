"""slurm_client's parsers on recorded output of the real Slurm 22.05.8 commands
(tests/data/slurm/, recorded from a two-node cluster: n1, n2 with 4 GPUs each, n2 drained
"disk check", a heterogeneous job sluice-9-a1 on n1 + n2:3 GPUs, a foreign job holding 2
GPUs of n1, a job that exited 3, a pending one), and the Slurm executor's pure decisions.
No Slurm is needed here; tests/fabric/slurm/test_slurm_executor.py drives a real one."""


import pytest

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.slurm_executor import components
from job_scheduler.service.slurm_topology import check_topology
from job_scheduler.service.slurm_capacity import apply_capacity, foreign_gpus
from slurm_client import SlurmClient, SlurmCommandError, SlurmUnavailable
from slurm_client.parse import (Component, JobInfo, Submission, expand_hostlist, job_outcome,
                                parse_kv_line, parse_sbatch_parsable, parse_scontrol_jobs,
                                parse_squeue_lines, parse_topology, sbatch_argv)
from slurm_client.nodes import NodeInfo, ParseError, parse_sinfo_json
from slurm_client.gres import gres_gpus
from topologies.model import parse_topology as topology_from_dict
from support.paths import TEST_DATA
from support.fake_slurm import TOPO

DATA = TEST_DATA / "slurm"


def read(name: str) -> str:
    return (DATA / name).read_text()


# ---- small pieces ----------------------------------------------------------------------

@pytest.mark.parametrize("text, names", [
    ("n1", ["n1"]), ("n[1-3]", ["n1", "n2", "n3"]), ("h[1-2,5],tor1", ["h1", "h2", "h5", "tor1"]),
    ("n[08-10]", ["n08", "n09", "n10"]), ("rack[1-2]", ["rack1", "rack2"]), ("", []),
    ("(null)", []), ("a[1-2]-b", ["a1-b", "a2-b"])])
def test_expand_hostlist(text, names):
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("bad", ["n[1-", "n[a-b]", "n]1["])
def test_expand_hostlist_rejects_garbage(bad):
    with pytest.raises(ParseError):
        expand_hostlist(bad)


@pytest.mark.parametrize("text, gpus", [
    ("gpu:4", 4), ("gpu:0", 0), ("gpu:a100:2(S:0-1)", 2), ("gpu:2(IDX:0-1),nic:1", 2),
    ("gpu:a100:2,gpu:v100:1", 3), ("(null)", 0), ("", 0), (None, 0), ("gres/gpu=3", 3),
    ("gres:gpu:2", 0), ("nic:4", 0)])
def test_gres_gpus(text, gpus):
    assert gres_gpus(text) == gpus


def test_kv_line_values_with_spaces():
    kv = parse_kv_line("NodeName=n2 OS=Linux 6.1 #1 SMP State=MIXED+DRAIN Reason=disk check "
                       "[root@2026-11-25T10:33:02]")
    assert kv == {"NodeName": "n2", "OS": "Linux 6.1 #1 SMP", "State": "MIXED+DRAIN",
                  "Reason": "disk check [root@2026-11-25T10:33:02]"}
    with pytest.raises(ParseError):
        parse_kv_line("no pairs here")


def test_sbatch_parsable():
    assert parse_sbatch_parsable("12\n") == 12
    assert parse_sbatch_parsable("12;cluster\n") == 12
    with pytest.raises(ParseError):
        parse_sbatch_parsable("sbatch: error: nope")


# ---- recorded outputs ------------------------------------------------------------------

def test_sinfo_json_nodes():
    nodes = {n.name: n for n in parse_sinfo_json(read("sinfo.json"))}
    assert set(nodes) == {"n1", "n2"}
    n1, n2 = nodes["n1"], nodes["n2"]
    assert (n1.gpus, n1.gpus_used, n1.usable, n1.address) == (4, 2, True, "127.0.0.1")
    assert (n2.gpus, n2.gpus_used, n2.usable) == (4, 3, False)
    assert "DRAIN" in n2.flags and n2.reason == "disk check"
    with pytest.raises(ParseError):
        parse_sinfo_json("not json")


def test_a_node_backfill_planned_for_a_pending_job_is_still_usable():
    idle_planned = NodeInfo("n3", "127.0.0.1", "n3", "IDLE", frozenset({"PLANNED"}), gpus=4)
    assert idle_planned.usable
    assert not NodeInfo("n4", "127.0.0.1", "n4", "IDLE", frozenset({"DRAIN"}), gpus=4).usable


def test_scontrol_jobs_het_failed_pending():
    jobs = parse_scontrol_jobs(read("scontrol_show_job.txt"))
    het = [j for j in jobs if j.name == "sluice-9-a1"]
    assert [(j.job_id, j.het_job_id, j.het_offset, j.nodes) for j in het] == [
        (10, 10, 0, ("n1",)), (11, 10, 1, ("n2",))]
    assert all(j.leader == 10 and j.state == "RUNNING" for j in het)
    failed = next(j for j in jobs if j.name == "failer")
    assert (failed.state, failed.reason, failed.exit_code) == ("FAILED", "NonZeroExitCode", "3:0")
    assert job_outcome([failed]) == ("failed", "FAILED, reason NonZeroExitCode, exit code "
                                     "3:0, nodes n1")
    pending = next(j for j in jobs if j.name == "pend")
    assert pending.state == "PENDING" and "UnavailableNodes:n2" in pending.reason
    assert job_outcome([pending])[0] == "active"
    assert job_outcome(het)[0] == "active"


def test_squeue_format_lines():
    jobs = parse_squeue_lines(read("squeue_format.txt"))
    het = [j for j in jobs if j.leader == 4]
    assert [(j.het_offset, j.state, j.nodes) for j in het] == [(0, "RUNNING", ("n1",)),
                                                               (1, "RUNNING", ("n2",))]
    assert job_outcome([j for j in jobs if j.leader == 2]) == ("completed", "COMPLETED")
    assert next(j for j in jobs if j.name == "foreign").user == "root"
    with pytest.raises(ParseError):
        parse_squeue_lines("garbage line")


def test_topology_switches():
    switches = {s.name: s for s in parse_topology(read("scontrol_show_topology.txt"))}
    assert switches["rack1"].nodes == ("n1",) and switches["rack1"].level == 0
    assert switches["spine"].switches == ("rack1", "rack2") and switches["spine"].level == 1


def test_job_outcome_any_failed_part_fails_the_job():
    parts = [JobInfo(5, "NODE_FAIL", reason="NodeDown", nodes=("n2",), het_job_id=4,
                     het_offset=1),
             JobInfo(4, "RUNNING", het_job_id=4, het_offset=0)]
    assert job_outcome(parts)[0] == "failing"          # the rest is still winding down
    parts[1] = JobInfo(4, "CANCELLED", het_job_id=4, het_offset=0)
    verdict, words = job_outcome(parts)
    assert verdict == "failed" and words.startswith("NODE_FAIL, reason NodeDown")


# ---- errors: which is "Slurm is down" and which is "Slurm said no" ------------------------

def _fails_with(text: str) -> list[str]:
    return ["sh", "-c", f"echo '{text}' >&2; exit 1"]


def test_unreachable_and_rejected_are_told_apart():
    client = SlurmClient()
    down = read("squeue_ctld_down.txt").strip()
    with pytest.raises(SlurmUnavailable) as err:
        client.run(_fails_with(down))
    assert "Unable to contact slurm controller" in str(err.value) and "sh -c" in err.value.command
    rejected = read("sbatch_rejected.txt").strip()
    with pytest.raises(SlurmCommandError) as err:
        client.run(_fails_with(rejected))
    assert not isinstance(err.value, SlurmUnavailable)
    assert err.value.message == rejected
    with pytest.raises(SlurmUnavailable) as err:
        client.run(["no-such-slurm-command-xyz"])
    assert "not installed" in str(err.value)


# ---- submissions ---------------------------------------------------------------------

def test_components_one_per_host_ps_host_first():
    parts = components(["h3"], ["h1", "h1", "h3", "h2"])
    # a CPU per worker: each worker is a step of its own (--exact --gres=gpu:1)
    assert parts == [Component("h3", 1), Component("h1", 2, 2), Component("h2", 1)]
    # a PS host without workers is a 0-GPU component
    assert components(["h4"], ["h1"]) == [Component("h4", 0), Component("h1", 1)]


def test_sbatch_argv_heterogeneous():
    sub = Submission("sluice-3-a1", (Component("h3", 1), Component("h1", 2)), "/r/job.sh",
                     "/r/slurm-%j.out", partition="gpu")
    argv = sbatch_argv(sub)
    assert argv[:4] == ["sbatch", "--parsable", "--job-name=sluice-3-a1",
                        "--output=/r/slurm-%j.out"]
    first, second = " ".join(argv[4:-1]).split(" : ")
    assert "--nodelist=h3" in first and "--gres=gpu:1" in first and "--no-requeue" in first
    assert "--nodelist=h1" in second and "--gres=gpu:2" in second
    assert "--partition=gpu" in second and argv[-1] == "/r/job.sh"
    with pytest.raises(ValueError):
        sbatch_argv(Submission("x", (Component("h1", 1), Component("h1", 1)), "s", "o"))


# ---- capacity ------------------------------------------------------------------------


def node(name, used=0, state="IDLE", flags=(), gpus=4, addr=None, reason=""):
    return NodeInfo(name, addr or name, name, state, frozenset(flags), gpus, used, reason)


def test_capacity_foreign_gpus_drained_down_and_unknown_nodes():
    topo = topology_from_dict(TOPO)
    state = ClusterState(topo)
    # sluice runs a 2-GPU job on h1 (recorded; Slurm runs it): Slurm says 3 used on h1
    from sluice_common.placement import Placement
    state.allocate(Placement("own", ("h1",), ("h1", "h1")))
    nodes = {"h1": node("h1", used=3, state="MIXED"),
             "h2": node("h2", state="IDLE", flags={"DRAIN"}, reason="disk check")}
    why = apply_capacity(state, nodes, own_running={"h1": 2})
    assert state.free == [1, 0, 0]       # h1: 4 - 2 own - 1 foreign; h2 drained; h3 unknown
    assert set(why) == {"h1", "h2", "h3"} and "disk check" in why["h2"]
    assert "not a Slurm node" in why["h3"]


def test_capacity_own_job_not_yet_running_in_slurm_is_not_counted_twice():
    topo = topology_from_dict(TOPO)
    state = ClusterState(topo)
    from sluice_common.placement import Placement
    state.allocate(Placement("own", ("h2",), ("h2",) * 4))     # recorded, Slurm: pending
    nodes = {h: node(h) for h in ("h1", "h2", "h3")}
    nodes["h3"] = node("h3", state="DOWN")
    apply_capacity(state, nodes, own_running={})
    assert state.free == [4, 0, 0]
    assert foreign_gpus({"h1": node("h1", used=2)}, {"h1": 3}) == {"h1": 0}


def test_capacity_slurm_knows_fewer_gpus_than_the_topology():
    state = ClusterState(topology_from_dict(TOPO))
    apply_capacity(state, {h: node(h, gpus=2) for h in ("h1", "h2", "h3")}, {})
    assert state.free == [2, 2, 2]


def test_check_topology_names_unknown_hosts_and_wrong_addresses():
    topo = topology_from_dict(TOPO)
    nodes = [node("h1", addr="10.0.0.1"), node("h2", addr="10.0.0.9", gpus=2)]
    problems = check_topology(topo, nodes)
    assert any("not known to Slurm: h3" in p for p in problems)
    assert any("h2: ip 10.0.0.2 but Slurm's NodeAddr is 10.0.0.9" in p for p in problems)
    assert any("h2: 4 GPUs but Slurm configures 2" in p for p in problems)
    ok = [node(h.name, addr=h.ip) for h in topo.hosts]
    assert check_topology(topo, ok) == []
