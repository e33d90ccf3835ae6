"""Let the test cluster's Unix users reach a checkout that sits in a private tree.

The local Slurm cluster runs its jobs as unprivileged users (``sluice-alice``,
``sluice-bob``: `make slurm` creates them), and their job steps run the checkout's own
Python (``<repo>/.venv/bin/python -m ps_runtime.slurm_job``). A checkout under a 0700
directory (``/root``, a CI workspace) is unreachable for them, so every such job would
fail at start. :func:`traversable` adds the search bit for others (``o+x``: enter, not
list) to each ancestor that lacks it, for the life of the cluster, and puts every mode
back afterwards, also when the body fails: the one machine-wide change it makes is undone.
"""

from __future__ import annotations

import os
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def closed_ancestors(path: Path) -> list[Path]:
    """The directories from ``/`` down to ``path`` that others cannot enter."""
    path = Path(path).resolve()
    chain = [*reversed(path.parents), path] if path.is_dir() else [*reversed(path.parents)]
    return [d for d in chain if not d.stat().st_mode & stat.S_IXOTH]


@contextmanager
def traversable(*paths: Path, say=print) -> Iterator[list[Path]]:
    """Make every ancestor of ``paths`` enterable by others while the body runs; yields
    the directories it opened (empty when nothing needed it)."""
    opened: dict[Path, int] = {}
    try:
        for path in paths:
            for d in closed_ancestors(path):
                if d not in opened:
                    mode = stat.S_IMODE(d.stat().st_mode)
                    os.chmod(d, mode | stat.S_IXOTH)
                    opened[d] = mode
        if opened:
            say(f"sluice: the cluster's users may now enter {', '.join(map(str, opened))} "
                "(o+x; put back when the cluster stops)", file=sys.stderr, flush=True)
        yield list(opened)
    finally:
        for d, mode in opened.items():
            try:
                os.chmod(d, mode)
            except OSError as err:          # say it: a mode left open must not go unseen
                print(f"sluice: could not restore mode {mode:o} of {d}: {err}",
                      file=sys.stderr, flush=True)
