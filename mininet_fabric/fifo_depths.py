"""The short FIFO's depth chosen by a sweep, per offered load and TCP
congestion control (pure apart from :func:`load_depths`).

``sluice calibrate fifo-depth`` (:mod:`mininet_tests.calibration.fifo_depth`) runs the
heavy-tail mix with priority off on FIFOs of a few packets up to the deep FIFO's 200 on
tuning seeds and prints the depth with the lowest mean JCT; that depth, with the run that chose it, is entered in
``mininet_fabric/data/fifo_depths.yaml``. The heavy-tail experiment's ``off-shallow``
baseline then has that depth at that load and congestion control
(:func:`mininet_fabric.baselines.swept_shallow`); where no sweep was run it keeps twice
the bandwidth-delay product (at least one HTB burst), and its summary says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA_FILE = Path(__file__).parent / "data" / "fifo_depths.yaml"


@dataclass(frozen=True)
class SweptDepth:
    load: float
    cc: str
    depth_packets: int
    sweep: str                 # where the sweep's table is (bench/RESULTS.md section)
    seeds: tuple[int, ...]

    def __post_init__(self):
        if not 0 < self.load < 1 or not self.cc or not self.sweep:
            raise ValueError(f"a swept depth needs a load in (0, 1), a congestion control and "
                             f"its sweep, got {self}")
        if isinstance(self.depth_packets, bool) or not isinstance(self.depth_packets, int) \
                or self.depth_packets < 1:
            raise ValueError(f"depth_packets must be an integer >= 1, got {self.depth_packets!r}")


def parse_depths(entries: list[dict] | None, source: str = "fifo_depths") -> tuple[SweptDepth, ...]:
    """The entries of the data file; an unknown or missing field or a repeated (load, cc)
    is an error naming the entry."""
    out = []
    for k, e in enumerate(entries or []):
        fields = {"load", "cc", "depth_packets", "sweep", "seeds"}
        if not isinstance(e, dict) or set(e) != fields:
            raise ValueError(f"{source}: entry {k} must have exactly {sorted(fields)}, got {e!r}")
        try:
            out.append(SweptDepth(float(e["load"]), str(e["cc"]), e["depth_packets"],
                                  str(e["sweep"]), tuple(int(s) for s in e["seeds"])))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{source}: entry {k}: {err}") from None
    keys = [(d.load, d.cc) for d in out]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{source}: a (load, cc) appears twice: {keys}")
    return tuple(out)


def load_depths(path: str | Path | None = None) -> tuple[SweptDepth, ...]:
    import yaml

    path = Path(path or DATA_FILE)
    return parse_depths(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))


def swept_depth(load: float, cc: str, depths: tuple[SweptDepth, ...] | None = None
                ) -> SweptDepth | None:
    """The sweep's depth for ``load`` and ``cc``; None where no sweep was run."""
    for d in load_depths() if depths is None else depths:
        if abs(d.load - load) < 1e-9 and d.cc == cc:
            return d
    return None


def record_depth(entry: SweptDepth, path: str | Path | None = None) -> Path:
    """Write ``entry`` into the data file (replacing the one of its load and cc)."""
    import yaml

    path = Path(path or DATA_FILE)
    kept = [d for d in load_depths(path) if (d.load, d.cc) != (entry.load, entry.cc)]
    rows = [{"load": d.load, "cc": d.cc, "depth_packets": d.depth_packets, "sweep": d.sweep,
             "seeds": list(d.seeds)} for d in sorted(kept + [entry], key=lambda d: (d.load, d.cc))]
    head = "".join(line + "\n" for line in path.read_text(encoding="utf-8").splitlines()
                   if line.startswith("#")) if path.exists() else ""
    path.write_text(head + yaml.safe_dump(rows, sort_keys=False, allow_unicode=True, width=200),
                    encoding="utf-8")
    return path
