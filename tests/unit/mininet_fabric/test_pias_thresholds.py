"""PIAS's demotion thresholds (mininet_fabric/pias_thresholds.py) and the heavy-tail
mix's per-connection size distribution they are derived from (pure, no I/O)."""

import math

import pytest

from mininet_fabric.pias_thresholds import SizeMixture, derive_thresholds, mean_fct, _grid
from mininet_tests.heavy_tail.config import BYTES_LO, SCALE
from mininet_tests.heavy_tail.connection_sizes import batch_counts, connection_sizes
from mininet_tests.heavy_tail.mix import heavy_tail_mix

SIZES = connection_sizes(SCALE, BYTES_LO)


def _generated_sizes(n_seeds=60, jobs=200):
    """Bytes per direction of jobs the mix generator really draws."""
    return [j.batches * j.bytes_per_batch for seed in range(n_seeds)
            for j in heavy_tail_mix(1000 + seed, 0.7, 1.5e6, jobs=jobs, scale=SCALE,
                                    bytes_lo=BYTES_LO)]


def test_the_distribution_matches_what_the_mix_generator_draws():
    drawn = _generated_sizes()
    for a in (3e5, 1e6, 3e6, 1e7, 4e7):
        share = sum(x > a for x in drawn) / len(drawn)
        assert SIZES.survival(a) == pytest.approx(share, abs=0.012), a
        capped = sum(min(x, a) for x in drawn) / len(drawn)
        assert SIZES.capped_mean(a) == pytest.approx(capped, rel=0.03), a
    assert SIZES.support == (BYTES_LO, 100 * 10 * BYTES_LO)


def test_batch_counts_are_the_rounded_bounded_pareto():
    counts = batch_counts(1.1, SCALE)
    assert sum(counts.values()) == pytest.approx(1.0)
    drawn = [j.batches for s in range(40) for j in
             heavy_tail_mix(s, 0.5, 1.5e6, jobs=200, scale=SCALE, bytes_lo=BYTES_LO)]
    for n in (1, 2, 5):
        assert counts[n] == pytest.approx(drawn.count(n) / len(drawn), abs=0.02)


def test_no_threshold_is_the_fifo_queue():
    ex, ex2 = SIZES.mean(), SIZES.capped_square(SIZES.support[1])
    for load in (0.3, 0.7):
        lam = load / ex
        # M/G/1 FIFO (Pollaczek-Khinchine) and M/M/1 sojourn
        assert mean_fct(SIZES, load, (), exponential=False) == pytest.approx(
            ex + lam * ex2 / (2 * (1 - load)))
        assert mean_fct(SIZES, load, ()) == pytest.approx(ex / (1 - load))


def test_one_size_gains_nothing_from_a_threshold_above_it():
    one = SizeMixture(((1.0, 1e6, 1e6),))
    assert mean_fct(one, 0.5, (2e6,)) == pytest.approx(mean_fct(one, 0.5, ()))


@pytest.mark.parametrize("load", [0.5, 0.7, 0.9])
def test_derived_thresholds_are_a_local_optimum_that_beats_fifo_and_geometric(load):
    th = derive_thresholds(SIZES, load, 8)
    assert len(th) == 7 and list(th) == sorted(set(th))
    lo, hi = SIZES.support
    assert lo < th[0] and th[-1] < hi
    best = mean_fct(SIZES, load, th)
    assert best < 0.8 * mean_fct(SIZES, load, ())
    # the attained rule's geometric levels (4 MiB, then x4) are worse under the same model
    assert best < mean_fct(SIZES, load, tuple(4 * 2 ** 20 * 4 ** k for k in range(7)))
    grid = _grid(SIZES, 40)
    for k in range(7):                  # one grid step either way helps no threshold
        i = min(range(len(grid)), key=lambda g: abs(grid[g] - th[k]))
        for j in [g for g in (i - 1, i + 1) if 0 <= g < len(grid)]:
            moved = sorted(set(th[:k] + (grid[j],) + th[k + 1:]))
            if len(moved) == 7:
                assert mean_fct(SIZES, load, tuple(moved)) >= best * (1 - 1e-9)


def test_a_busier_link_demotes_later():
    assert derive_thresholds(SIZES, 0.9, 8)[0] > derive_thresholds(SIZES, 0.5, 8)[0]


def test_fewer_queues_fewer_thresholds():
    assert derive_thresholds(SIZES, 0.7, 1) == ()
    assert len(derive_thresholds(SIZES, 0.7, 2)) == 1


@pytest.mark.parametrize("bad", [
    lambda: mean_fct(SIZES, 1.0, ()),
    lambda: mean_fct(SIZES, 0.5, (2e6, 1e6)),
    lambda: derive_thresholds(SIZES, 0.0, 8),
    lambda: derive_thresholds(SIZES, 0.5, 0),
    lambda: SizeMixture(((0.5, 1e6, 2e6),)),
    lambda: SizeMixture(((1.0, 2e6, 1e6),)),
    lambda: connection_sizes(0, BYTES_LO),
])
def test_bad_input_is_refused(bad):
    with pytest.raises(ValueError):
        bad()


def test_the_moments_are_consistent():
    for a in (1e5, 5e5, 5e6, 2e8):
        assert SIZES.capped_mean(a) <= min(a, SIZES.mean()) + 1e-6
        assert SIZES.capped_square(a) >= SIZES.capped_mean(a) ** 2 - 1e-3
    assert SIZES.survival(1e5) == 1.0 and SIZES.survival(2e8) == 0.0
    assert math.isclose(SIZES.capped_mean(math.inf), SIZES.mean())
