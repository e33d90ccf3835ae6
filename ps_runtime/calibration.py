"""What the PS runtime costs beyond the Proteus model, for the estimator of a real run.

The paper's C(n) counts compute and the gradient bytes over the link; a real ps-lite job
also pays (figures measured on a host with two cores, docs/design.md, "The test machine";
``bench/ps_runtime/bench_emulation.py``):

- ``startup_s``: launch -> the job's ``kv.init`` (process hand-over, ps-lite's rendezvous
  and start barrier) and its closing barrier. For emulated workers, pre-started and handed
  over (``ps_runtime.warm``, ``ps_runtime.zygote``), it is the exchange model's calibrated
  ``startup_s`` (:func:`runtime_terms`; ``kv.init``'s exchange itself is priced by the
  estimator, ``Estimator.init_s``, and the predictions); a round second in its place
  would put a 2 s job of the demo 0.6 s long;
- ``sync_s``: one push + pull round through the PS beyond moving the bytes (ZeroMQ
  messages, the server's summation, waiting for the slowest worker's batch; on a loaded
  machine also the CPU the other jobs' processes take), every iteration;
- ``link_efficiency``: the share of a link's rate the payload gets (the exchange model's
  calibrated ``efficiency``, :func:`runtime_terms`, which replaces the 0.8 below).
  docs/design.md's measurement
  (2 workers, 1 server, 8 MB key, 100 Mbit/s links: 3.2 s per push + pull against the
  2.56 s the bytes need at line rate) fits 0.8: TCP/IP headers and ACKs, HTB shaping.

- ``launch_s`` and ``close_s``: the scheduler's decision to start a job until its first
  batch begins, and its last
  batch's end until its last process has exited, measured on ``sluice demo`` runs
  (:func:`launch_and_close`; ``sluice calibrate runtime``, recorded in
  ``sluice_common/data/runtime_overheads.yaml``); their sum is the start-up and close a
  job pays alone in the demo's simulator (``end_to_end.run.simulator``). The exchange
  model's own ``startup_s`` was measured on one small calibration job alone; the demo's
  jobs, with up to eight workers on a loaded machine, take about four times as long.
  torch's launch is its ``startup_s``.
- ``server_per_worker_s``: the parameter server takes each worker's push and answers its
  pull in turn, so a batch of n workers waits n times this beyond what the exchange
  model prices (:func:`server_per_worker_s`, measured by ``sluice calibrate runtime`` on
  the demo's jobs that ran on one host, where no link's model enters: about 1.3 ms on
  this machine, some 6 % of a demo job's batch on four GPUs). The run's estimator adds
  it to every batch (``Estimator(server_per_worker_s=...)``) and so do the predictions.
- the checkpoint of a suspension (:func:`checkpoint_costs`): a suspended job holds its
  GPUs past its last batch while its state is written (worker 0 writes the parameters and
  the momentum, ``ps_runtime.emulated_state``) and its processes exit, and a resumed one
  reads that state before its first batch. Measured on the demo's suspensions by ``sluice
  calibrate checkpoint`` (the workers log each write and read), recorded in
  ``sluice_common/data/checkpoint_costs.yaml``: the write and read rates and what a
  suspension holds beyond its write and the close. A vgg16 job of the demo
  (1.1 GB of state) holds its GPUs about 4 s past its last batch, ten times a close.

The simulator keeps the paper's model (no such terms). ``sluice run``/``demo`` and the
experiment scripts take ``startup_s`` from here; their
estimator prices the exchange with the exchange model instead of ``sync_s`` and
``link_efficiency`` (``end_to_end.run.run_estimator``: one set of constants for the
scheduler and the predictions).
"""

from __future__ import annotations

from dataclasses import dataclass

RUNTIME = {
    # emulated: startup_s is the exchange model's calibrated one (runtime_terms)
    "emulated": {"sync_s": 0.006, "link_efficiency": 0.8},
    # torch on the CPU: every worker imports torch and builds its model first
    "torch": {"startup_s": 12.0, "sync_s": 0.006, "link_efficiency": 0.8},
}


def runtime_terms(compute: str) -> dict[str, float]:
    """The terms for ``compute``; ``link_efficiency`` is the exchange model's, calibrated on
    the fabric (sluice_common.exchange: the payload's share of a shaped link's rate), so
    that the estimator's Comm(n) and the model price the bytes alike."""
    from sluice_common.exchange import default_constants

    c = default_constants()
    terms = dict(RUNTIME.get(compute, RUNTIME["emulated"]))
    terms["link_efficiency"] = c.efficiency
    terms.setdefault("startup_s", c.startup_s)
    return terms


OVERHEADS_FILE = "runtime_overheads.yaml"
CHECKPOINT_FILE = "checkpoint_costs.yaml"


def _measured() -> dict:
    import sluice_common
    import yaml
    from pathlib import Path

    path = Path(sluice_common.__file__).resolve().parent / "data" / OVERHEADS_FILE
    return yaml.safe_load(path.read_text())


def launch_and_close(compute: str) -> tuple[float, float]:
    """``(launch_s, close_s)`` for ``compute`` as measured on the demo's runs (module
    doc); a compute with a start-up of its own (torch builds its model) launches in that
    time."""
    data = _measured()
    own = RUNTIME.get(compute, RUNTIME["emulated"])
    launch = own["startup_s"] if "startup_s" in own else float(data["launch_s"])
    return launch, float(data["close_s"])


def server_per_worker_s() -> float:
    """The PS's seconds per worker and batch beyond the exchange model's (module doc), as
    measured on the demo's runs; the server's, so the same whatever the workers compute."""
    return float(_measured()["server_per_worker_s"])


@dataclass(frozen=True)
class CheckpointCosts:
    """What a suspension and a resume cost beyond the batches (module doc): ``write_mb_s``
    and ``read_mb_s`` the state's write and read rates (MB/s), ``extra_s`` what a
    suspended job holds past its last batch beyond the write and the run's close."""
    write_mb_s: float
    read_mb_s: float
    extra_s: float

    def hold_s(self, state_bytes: float) -> float:
        """A suspended job's last batch -> its processes exit, less the run's close."""
        return state_bytes / 1e6 / self.write_mb_s + self.extra_s

    def load_s(self, state_bytes: float) -> float:
        """What a resumed job's start-up takes beyond a fresh one's: reading its state."""
        return state_bytes / 1e6 / self.read_mb_s


def checkpoint_costs() -> CheckpointCosts | None:
    """The checkpoint's costs as measured on the demo's suspensions; None where none was
    measured (a suspension then costs what a close costs)."""
    import sluice_common
    import yaml
    from pathlib import Path

    path = Path(sluice_common.__file__).resolve().parent / "data" / CHECKPOINT_FILE
    if not path.exists():
        return None
    got = yaml.safe_load(path.read_text())
    return CheckpointCosts(float(got["write_mb_s"]), float(got["read_mb_s"]),
                           float(got["extra_s"]))
