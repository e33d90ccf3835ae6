"""No import cycle between any two modules of the project (lazy imports included).

import-linter's contracts (pyproject.toml, run by `make test`) check the layers between
packages and cycles between sibling modules; this checks every module against every
other, across packages and sub-packages, on grimp's graph (the one import-linter reads).
"""

import grimp
import networkx as nx

PACKAGES = ("bench", "sluice", "mininet_tests", "end_to_end", "job_scheduler", "ps_runtime",
            "mininet_fabric", "slurm_client", "controller", "topologies", "sluice_common")


def test_the_module_import_graph_has_no_cycle():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    edges = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            edges.add_edge(module, imported)
    assert edges.number_of_edges() > 200          # the graph was really read (about 290)
    cycles = [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1]
    assert cycles == []


def test_the_cycle_check_sees_a_cycle():
    graph = grimp.build_graph("sluice_common", cache_dir=None)
    graph.add_import(importer="sluice_common.errors", imported="sluice_common.jobspec")
    edges = nx.DiGraph((m, i) for m in graph.modules
                       for i in graph.find_modules_directly_imported_by(m))
    assert any(len(c) > 1 for c in nx.strongly_connected_components(edges))
