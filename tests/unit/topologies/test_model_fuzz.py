"""Topology YAML gets the same treatment as job files and trace CSVs (hypothesis):

- any set of faults, at most one per element, is refused with exactly one error per fault,
  each naming the file, the element and the field, all in one run;
- any mutation of a real topology document, and any text at all, gives an InputError
  naming the file, never another exception; whatever is accepted is a usable fabric.
"""

import copy

import networkx as nx
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice_common.errors import InputError
from topologies import BUILTIN_DIR, parse_topology
from topologies.model import load_topology_file
from support.yaml_fuzz import yaml_values

BASE = {
    "name": "t",
    "switches": [{"name": "tor1", "role": "tor"}, {"name": "tor2", "role": "tor"},
                 {"name": "sp", "role": "spine"}],
    "racks": [{"name": "r1", "tor": "tor1"}, {"name": "r2", "tor": "tor2"}],
    "hosts": [{"name": f"h{i}", "rack": "r1" if i <= 2 else "r2", "gpus": 4, "bw": 100}
              for i in range(1, 5)],
    "links": [{"a": "tor1", "b": "sp", "bw": 50}, {"a": "tor2", "b": "sp", "bw": 50}],
}

# (section, index) -> the faults that element can get, each with the text its one error
# must carry after "<file>: ".
FAULTS = {
    ("hosts", 0): [({"bw": 0}, "host 'h1': field 'bw'"),
                   ({"ip": "300.1.1.1"}, "host 'h1': field 'ip'")],
    ("hosts", 1): [({"gpus": -1}, "host 'h2': field 'gpus'"),
                   ({"gpus": "four"}, "host 'h2': field 'gpus'")],
    ("hosts", 2): [({"colour": "red"}, "host 'h3': field 'colour'")],
    ("hosts", 3): [({"rack": "r9"}, "host 'h4': field 'rack'")],
    ("links", 0): [({"bw": -5}, "link tor1-sp: field 'bw'")],
    ("links", 1): [({"b": "nowhere"}, "link tor2-nowhere: dangling link")],
    ("switches", 2): [({"role": "router"}, "switch 'sp': field 'role'")],
    ("racks", 1): [({"tor": "tor9"}, "rack 'r2': field 'tor'")],
}
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.dictionaries(st.sampled_from(sorted(FAULTS)), st.integers(0, 1)))
def test_every_fault_is_reported_once_in_one_run(chosen):
    data = copy.deepcopy(BASE)
    expected = set()
    for (section, index), pick in chosen.items():
        change, text = FAULTS[(section, index)][pick % len(FAULTS[(section, index)])]
        data[section][index].update(change)
        expected.add(f"f.yaml: {text}")
    if not expected:
        assert len(parse_topology(data, "f.yaml").hosts) == 4
        return
    try:
        parse_topology(data, "f.yaml")
    except InputError as err:
        lines = [e.format() for e in err.errors]    # one error or all of them
    else:
        raise AssertionError(f"accepted a topology with faults {sorted(expected)}")
    assert len(lines) == len(expected), lines
    for text in expected:
        assert sum(line.startswith(text) for line in lines) == 1, (text, lines)


values = yaml_values(["tor1", "spine1", "rack1", "h1", "tor", "core"],
                     ["name", "rack", "tor", "a", "b", "bw", "gpus", "role"],
                     int_bound=10**6, size=3, max_leaves=8)
SECTIONS = ("switches", "racks", "hosts", "links")
REAL = [yaml.safe_load(path.read_text()) for path in sorted(BUILTIN_DIR.glob("*.yaml"))]


@st.composite
def mutated(draw):
    data = copy.deepcopy(draw(st.sampled_from(REAL)))
    for _ in range(draw(st.integers(1, 3))):
        section = draw(st.sampled_from(SECTIONS + ("name", "emulation", "extra")))
        items = data.get(section)
        if isinstance(items, list) and items and draw(st.booleans()):
            item = draw(st.sampled_from(items))
            if isinstance(item, dict):
                key = draw(st.sampled_from(sorted(item) + ["zz"]))
                if draw(st.booleans()):
                    item[key] = draw(values)
                else:
                    item.pop(key, None)
        elif draw(st.booleans()):
            data[section] = draw(values)
        else:
            data.pop(section, None)
    return data


@FUZZ
@given(st.one_of(mutated(), values))
def test_fuzzed_documents_only_raise_input_error(data):
    try:
        topo = parse_topology(data, "fuzz.yaml")
    except InputError as err:
        assert all(e.source == "fuzz.yaml" and e.reason for e in err.errors)
        return
    # anything accepted is a usable fabric
    assert topo.hosts and nx.is_connected(topo.graph)
    racks = {r.name for r in topo.racks}
    assert all(h.gpus >= 0 and h.bw > 0 and h.rack in racks for h in topo.hosts)
    assert all(link.bw > 0 for link in topo.links)


@FUZZ
@given(st.text(max_size=80) | st.sampled_from([
    "name: t\nswitches: [", "{", "hosts: !!python/object:os.system x", "- a\n- b\n",
    "name: t\nswitches:\n  - &s {name: s}\n  - *s\n", "? [a]\n: 1\n"]))
def test_any_text_only_raises_input_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("topo") / "fuzz.yaml"
    path.write_text(text)
    try:
        load_topology_file(path)
    except InputError as err:
        assert str(path) in str(err)
