"""The collector's thresholds raised for a run and put back after it."""

from __future__ import annotations

import gc

import pytest

from job_scheduler.simulation.collector import RUN_THRESHOLD, rare_collections


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_raised_inside_and_restored_after(thresholds):
    gc.set_threshold(700, 10, 10)
    with rare_collections():
        assert gc.get_threshold() == (RUN_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_when_the_block_raises(thresholds):
    gc.set_threshold(500, 7, 3)
    with pytest.raises(RuntimeError), rare_collections(50_000):
        assert gc.get_threshold() == (50_000, 7, 3)
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == (500, 7, 3)


def test_never_collects_more_often_nor_turns_collection_on(thresholds):
    gc.set_threshold(1_000_000, 10, 10)
    with rare_collections(100):
        assert gc.get_threshold() == (1_000_000, 10, 10)
    gc.set_threshold(0, 10, 10)            # 0: collection off
    with rare_collections():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)
