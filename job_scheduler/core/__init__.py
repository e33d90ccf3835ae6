"""The pure scheduling core: the estimator's C(n), Proteus' GPU-count decision, Liquid
placement, the policies, the one loop body every scheduling loop runs (``decisions``),
the mechanisms (migration, time slicing, packing) and the live view of a loop that does
not simulate time. No processes, no HTTP, no fabric; the simulator
(:mod:`job_scheduler.simulation`) and the scheduler service (:mod:`job_scheduler.service`)
drive it."""
