"""mininet_fabric.traverse: a private tree opened for the cluster's users (o+x only) and
every mode put back afterwards, also when the body fails."""

import os
import stat

import pytest

from mininet_fabric.traverse import closed_ancestors, traversable


def _tree(tmp_path):
    top = tmp_path / "private"
    inner = top / "work" / "checkout"
    inner.mkdir(parents=True)
    os.chmod(top, 0o700)
    os.chmod(top / "work", 0o750)
    return top, inner


def _modes(*dirs):
    return [stat.S_IMODE(d.stat().st_mode) for d in dirs]


def test_private_ancestors_are_opened_for_the_body_and_restored(tmp_path):
    top, inner = _tree(tmp_path)
    before = _modes(top, top / "work", inner)
    assert top in closed_ancestors(inner) and top / "work" in closed_ancestors(inner)
    with traversable(inner, say=lambda *a, **k: None) as opened:
        assert set(opened) >= {top, top / "work"}
        assert not closed_ancestors(inner)
        # search only: others still cannot list the private directory
        assert not stat.S_IMODE(top.stat().st_mode) & stat.S_IROTH
    assert _modes(top, top / "work", inner) == before


def test_modes_come_back_when_the_body_fails(tmp_path):
    top, inner = _tree(tmp_path)
    before = _modes(top, top / "work")
    with pytest.raises(RuntimeError):
        with traversable(inner, say=lambda *a, **k: None):
            raise RuntimeError("the cluster failed")
    assert _modes(top, top / "work") == before


def test_an_open_tree_is_left_alone(tmp_path):
    inner = tmp_path / "open" / "checkout"
    inner.mkdir(parents=True)
    os.chmod(tmp_path / "open", 0o755)
    said = []
    with traversable(inner, say=lambda *a, **k: said.append(a)) as opened:
        assert all(d not in opened for d in (tmp_path / "open", inner))
    assert stat.S_IMODE((tmp_path / "open").stat().st_mode) == 0o755
