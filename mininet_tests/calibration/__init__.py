"""Calibration: the measurements on the fabric that the package's data files come from.

``sluice calibrate`` (:mod:`mininet_tests.calibration.cli`) fits and writes them:

- ``exchange`` (:mod:`~mininet_tests.calibration.exchange`): the exchange model's constants,
  ``sluice_common/data/exchange_constants.yaml``, from jobs alone, sharing and arriving
  among bulk jobs (:mod:`~mininet_tests.calibration.runs`: the workload and how it runs);
- ``queues`` (:mod:`~mininet_tests.calibration.queues`): one or more of its queue stages
  alone, on top of the shipped constants;
- ``fifo-depth`` (:mod:`~mininet_tests.calibration.fifo_depth`): the short FIFO's depth per
  load and congestion control, ``mininet_fabric/data/fifo_depths.yaml``;
- ``profile`` (:mod:`~mininet_tests.calibration.p100_profile`): the derived P100 compute
  profile, ``sluice_common/data/p100_profile.yaml`` (no fabric).

Each fit records where it comes from (command, date, commit, machine, load, seeds) beside
the values it writes; each can fit an earlier run's stored measurements again without the
fabric (``--from``).
"""
