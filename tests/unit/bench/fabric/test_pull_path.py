"""bench.fabric.pull_path's runs: only the urgent job gets the window,
the bulk job arrives first and keeps every push before its pulls."""

from bench.fabric.pull_path import BULK, URGENT, mix


def test_only_the_urgent_job_gets_the_window_and_arrives_into_the_bulk_jobs_queue():
    jobs, overrides = mix("on", 3, 0)
    urgent = next(j for j in jobs if j.name.startswith(URGENT[0]))
    bulk = next(j for j in jobs if j.name.startswith(BULK[0]))
    assert overrides[urgent.name].pipeline_keys == 3
    assert overrides[bulk.name].pipeline_keys == 0
    assert bulk.arrival < urgent.arrival
    assert (urgent.bytes_per_batch, urgent.batches) == URGENT[1:]
    assert set(overrides) == {j.name for j in jobs}


def test_alone_is_the_urgent_job_only_and_names_differ_per_case():
    jobs, overrides = mix("alone", 0, 1)
    assert [j.name for j in jobs] == [f"{URGENT[0]}-alone-w0-1"]
    assert overrides[jobs[0].name].pipeline_keys == 0
    assert mix("off", 3, 0)[0][1].name != mix("on", 3, 0)[0][1].name
