"""The scheduler as a service (``sluice scheduler``, ``sluice submit``): the scheduling
loop over a persistent job store (``scheduler``), its REST API, client and metrics, the
executors that start jobs (local, simulated, Slurm), the Slurm topology import and the
link to the controller. It drives :mod:`job_scheduler.core`."""
