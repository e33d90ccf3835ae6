"""``python -m end_to_end.philly_distributions_cli PHILLY.csv [--out FILE]``: write the
Philly distributions file the demo draws from (``end_to_end.philly_distributions``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from end_to_end.philly_distributions import DEFAULT_OUT, distributions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m end_to_end.philly_distributions_cli",
                                     description="Write the Philly distributions the demo draws from.")
    parser.add_argument("trace", help="the Philly CSV (timestamp,duration,num_gpus,gpu_time,cluster)")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    from job_scheduler.simulation.workloads import load_philly
    from sluice_common.errors import InputError

    try:
        jobs = load_philly(args.trace)
    except (InputError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    found = distributions([(j.arrival, j.trace_gpus, j.trace_duration) for j in jobs])
    header = (f"# Distributions of the Philly trace ({len(jobs)} jobs), written by\n"
              f"# python -m end_to_end.philly_distributions_cli {Path(args.trace).name}\n"
              "# Quantiles at 0, 1, ..., 100 % in seconds; durations per GPU-count class\n"
              "# (8 = eight GPUs or more). The demo's workload is drawn from these\n"
              "# (end_to_end/workload_draw.py).\n")
    Path(args.out).write_text(header + yaml.safe_dump(found, default_flow_style=None, width=100))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
