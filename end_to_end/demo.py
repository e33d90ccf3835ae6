"""``sluice demo``: the default end-to-end demo (``end_to_end.run``: priority off vs on),
or with ``--executor slurm`` the same jobs through the scheduler service and a local Slurm
cluster on the fabric (``end_to_end.slurm_demo``)."""

from __future__ import annotations

from end_to_end import run


def configure_demo(parser) -> None:
    run.configure_demo(parser)
    parser.add_argument("--executor", default="direct", choices=("direct", "slurm"),
                        help="direct (default): jobs started on the fabric's hosts by the run "
                        "loop, priority off vs on; slurm: through `sluice scheduler --executor "
                        "slurm` and a local Slurm cluster on the fabric, report DIR/slurm.json")


def run_demo(args) -> int:
    if args.executor == "slurm":
        from end_to_end.slurm_demo import run_slurm_demo

        return run_slurm_demo(args)
    return run.run_demo(args)
