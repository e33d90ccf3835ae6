"""Let MXNet 1.9.1 (the last MXNet release, sluice's ps-lite transport) run on numpy >= 1.24.

MXNet reads, while it is being imported and in a few operators, numpy names that numpy
1.24 and 2.0 removed (``np.bool``, ``np.PZERO``, ``np.NAN``, ``np.alltrue``, ``np.in1d``,
...). :func:`install` puts back each one that the running numpy lacks, as the alias numpy
itself recommended when it removed the name; names numpy still has are never touched, so
on numpy 1.23 it changes nothing. :func:`import_mxnet` does that, then imports MXNet:
every PS process (``ps_runtime.server``, ``ps_runtime.worker``, the benchmark) imports
MXNet through it. Nothing else in numpy changes: only missing attributes are added.

MXNet's own package metadata still says ``numpy<2``; that cap predates numpy 2 and is not
a real need (see README, "numpy 2"), so on numpy 2 MXNet is installed with ``--no-deps``.
"""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np

MXNET_INSTALL_HINT = ("python -m pip install --no-deps mxnet==1.9.1  (its metadata caps "
                      "numpy<2, which sluice's ps_runtime.numpy_compat makes unnecessary; "
                      "`sluice train` runs this for you when MXNet is missing)")


def _msort(a):
    return np.sort(a, axis=0)


def _financial(name: str):
    """numpy 1.20 removed its financial functions but kept stubs that raise on call;
    MXNet's ``mxnet.numpy.fallback`` binds them at import, so the stub comes back."""
    def removed(*args, **kwargs):
        raise NotImplementedError(f"numpy.{name} was removed from numpy; use the "
                                  "numpy_financial package")
    removed.__name__ = name
    return removed


_FINANCIAL = ("fv", "ipmt", "irr", "mirr", "nper", "npv", "pmt", "ppmt", "pv", "rate")


def removed_names() -> dict[str, object]:
    """Every name MXNet 1.9.1 may read that some numpy >= 1.24 lacks -> its replacement."""
    return {
        # removed in 1.24 (deprecated aliases of the builtins)
        "bool": np.bool_, "int": int, "float": float, "complex": complex,
        "object": object, "str": str, "long": int, "unicode": str,
        # removed in 2.0
        "PZERO": 0.0, "NZERO": -0.0, "NAN": math.nan, "NaN": math.nan,
        "PINF": math.inf, "NINF": -math.inf, "Inf": math.inf, "Infinity": math.inf,
        "infty": math.inf,
        "alltrue": np.all, "sometrue": np.any, "product": np.prod, "cumproduct": np.cumprod,
        "round_": np.round, "float_": np.float64, "complex_": np.complex128,
        "unicode_": np.str_, "string_": np.bytes_, "msort": _msort,
        "in1d": np.isin,
        "trapz": getattr(np, "trapezoid", None),
        **{name: _financial(name) for name in _FINANCIAL},
    }


def missing_names() -> list[str]:
    """The names of :func:`removed_names` the running numpy does not have."""
    return [name for name in removed_names() if not _has(name)]


def _has(name: str) -> bool:
    try:
        with warnings.catch_warnings():     # numpy 1.2x warns on deprecated names
            warnings.simplefilter("ignore")
            getattr(np, name)
    except AttributeError:      # numpy 2 raises with a migration hint for expired names
        return False
    return True


def install() -> list[str]:
    """Give numpy back the names it lacks; returns those added (empty on numpy 1.23).
    Idempotent."""
    added = []
    for name, value in removed_names().items():
        if value is not None and not _has(name):
            setattr(np, name, value)
            added.append(name)
    return added


# Modules MXNet's import reaches for only inside ``try: ... except ImportError`` and a PS
# process never uses: scikit-learn (``mxnet.model``: the base class of its legacy
# FeedForward estimator) and scipy.stats (``mxnet.contrib.quantization``: entropy
# calibration). Importing them is about half of the import's CPU time (some 1 s of 2.2 s
# on one core), paid by every ps-lite scheduler, server and worker of every job.
NOT_FOR_MXNET = ("sklearn", "scipy.stats")


def import_mxnet():
    """``install()``, then ``import mxnet``, with :data:`NOT_FOR_MXNET` hidden from it
    (those this process has not imported yet; afterwards they import as usual). With
    ``DMLC_ROLE`` set to ``server`` or ``scheduler`` this import runs that role's whole
    ps-lite loop (MXNet's design)."""
    install()
    hidden = [name for name in NOT_FOR_MXNET if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None        # an import of it raises ImportError
    try:
        import mxnet
    except ModuleNotFoundError as err:
        if err.name != "mxnet":
            raise
        raise ImportError(f"MXNet is not installed ({err}); install it with: "
                          f"{MXNET_INSTALL_HINT}") from err
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    return mxnet
