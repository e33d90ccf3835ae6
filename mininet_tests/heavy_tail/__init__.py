"""Heavy-tailed PS jobs on one shaped rack uplink: priority off vs each ranking rule.

    .venv/bin/python -m mininet_tests.experiment_priority --mix heavy-tail --load 0.7 \\
        --seeds 5 --out DIR
    .venv/bin/python -m mininet_tests.experiment_priority --mix same-start --seeds 3 --out DIR

Every job has its parameter server in rack 1 (h1/h2) and its worker in rack 2 (h3/h4):
every push leaves rack 2 through tor2's 50 Mbit/s uplink egress and every pull leaves
rack 1 through tor1's, both shaped at the ToR egress with the HTB priority tree. Workers
are emulated (``ps_runtime.emulated_worker``: a sleep of the job's compute time per batch,
then a real ps-lite push and pull of its bytes), so a host with two cores runs 12 jobs
without torch. "Load" is the bottleneck link's offered load: offered bytes/s across the
uplink (per direction) divided by its capacity. With ``--compute profile`` (default) each
batch computes for the device profile's time of the model (:func:`profile_compute_s`:
AlexNet, batch 32, on the measured H100 profile, 4.2 ms: the profile's large-parameter,
little-compute model), so the jobs are communication-dominated, as large models on fast
GPUs are; ``--compute share`` draws a communication share of 30-70 % per job instead (a
mix with more compute). The job mix is :mod:`mininet_tests.heavy_tail.mix` (seeded);
``same-start`` is the sanity case: three equal communication-bound jobs arriving together.

For each seed the same jobs run once per mode, on one controller and fabric: ``off``
(no job registered: every flow in one FIFO class, TCP fair sharing), then the rules
``progress``, ``remaining``, ``attained`` switched at run time through the controller's
REST API. The mode order rotates with the seed. Results are paired per seed.

Writes ``DIR/summary.json`` (medians over seeds per mode: mean and p95 JCT, bottleneck
throughput under contention, makespan, slowdown by size bucket, the fluid model's mean
JCT), ``DIR/experiment.md`` and plots.

The package, one concern a module: ``config`` (the frozen options, built once by ``cli``),
``mix`` (the seeded job mix), ``fabric_setup`` (topology, hosts, ports, counters),
``predict`` (the exchange and fluid models' predictions, made before the runs),
``simulate`` (the mix in the discrete-event simulator, for its trust check),
``measure`` (each run's figures, and the run loop's sampling hook), ``run`` (the seeds and
modes), ``summary`` (medians, pairing, the checker's verdict), ``render`` (markdown, plot).
"""
