"""The discrete-event simulator (``sluice simulate``): the engine, the workloads it
replays (job files, traces, scenarios, bursty arrivals), its plots and its command line.
It drives :mod:`job_scheduler.core` and never imports the scheduler service."""
