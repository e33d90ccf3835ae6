"""The numpy compatibility shim MXNet 1.9.1 is imported through (ps_runtime.numpy_compat)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from ps_runtime import numpy_compat


@pytest.fixture
def bare_numpy(monkeypatch):
    """numpy as numpy >= 2 ships it: every name the shim may add is missing."""
    for name in numpy_compat.removed_names():
        if name in vars(np):
            monkeypatch.delattr(np, name)
    return np


def test_install_adds_every_missing_name_with_numpy_s_own_replacement(bare_numpy):
    missing = numpy_compat.missing_names()
    assert "PZERO" in missing and "alltrue" in missing and "in1d" in missing
    added = numpy_compat.install()
    assert sorted(added) == sorted(n for n in missing if numpy_compat.removed_names()[n] is not None)
    assert np.PZERO == 0.0 and math.copysign(1, np.NZERO) == -1
    assert math.isnan(np.NAN) and np.NINF == -math.inf and np.Inf == math.inf
    assert np.alltrue([True, True]) and not np.alltrue([True, False])
    assert np.sometrue([False, True])
    assert list(np.in1d([1, 2, 3], [2])) == [False, True, False]
    assert np.product([2, 3]) == 6 and list(np.cumproduct([2, 3])) == [2, 6]
    assert np.float_ is np.float64
    if "bool" in added:       # numpy 1.24-1.26 (numpy 2 has np.bool again, as np.bool_)
        assert np.bool is np.bool_
    assert (np.msort(np.array([[3, 1], [1, 2]])) == [[1, 1], [3, 2]]).all()
    with pytest.raises((NotImplementedError, RuntimeError), match="numpy_financial"):
        np.npv(0.1, [1, 2])     # numpy 1.2x's own stub raises RuntimeError
    assert numpy_compat.missing_names() == [n for n in missing
                                            if numpy_compat.removed_names()[n] is None]
    assert numpy_compat.install() == []        # idempotent


def test_install_never_replaces_a_name_numpy_has(monkeypatch):
    sentinel = object()
    monkeypatch.setattr(np, "alltrue", sentinel, raising=False)
    numpy_compat.install()
    assert np.alltrue is sentinel
    assert np.all is not sentinel


def test_mxnet_imports_and_sums_on_this_numpy():
    """In a fresh interpreter (MXNet imports once): the shim, then MXNet, without the
    modules it has no use for in a PS process (scikit-learn, scipy.stats), which import
    as usual afterwards; then a real NDArray computation and the zero-copy DLPack view
    the data path relies on."""
    code = """
import importlib, importlib.util, sys
import numpy, torch
from ps_runtime.numpy_compat import NOT_FOR_MXNET, import_mxnet
mx = import_mxnet()
assert not [m for m in NOT_FOR_MXNET if m in sys.modules], sorted(sys.modules)
for m in NOT_FOR_MXNET:
    if importlib.util.find_spec(m.split(".")[0]) is not None:
        importlib.import_module(m)
a = mx.nd.array([1.0, 2.0, 3.0])
assert (a * 2).asnumpy().tolist() == [2.0, 4.0, 6.0]
t = torch.zeros(4)
view = mx.nd.from_dlpack(torch.utils.dlpack.to_dlpack(t))
view[:] = 7.0
view.wait_to_read()
assert t.tolist() == [7.0] * 4, t
print("numpy", numpy.__version__, "ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"numpy {np.__version__} ok" in out.stdout


def test_a_missing_mxnet_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "mxnet", None)     # import mxnet -> ImportError
    with pytest.raises(ImportError, match="pip install --no-deps mxnet==1.9.1"):
        numpy_compat.import_mxnet()
