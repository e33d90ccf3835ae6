"""A synthetic `sluice run` result: two jobs, one decision, link samples."""

from __future__ import annotations


def synthetic_result(priority: bool, slow: float) -> dict:
    jobs = []
    for k, name in enumerate(("a", "b")):
        its = [[1.0 + i, 0, i + 1, 0.2 + (slow if name == "b" else 0.0)] for i in range(5)]
        mean = sum(it[3] for it in its) / len(its)
        jobs.append({"name": name, "model": "smallcnn", "arrival": 2.0 * k, "status": "finished",
                     "start": 2.0 * k + 1, "finish": 10.0 + 5 * k + slow, "gpus": 2,
                     "ps_hosts": ["h1"], "worker_hosts": ["h3", "h4"], "batches": 5,
                     "wait": 1.0, "turnaround": 10.0 + 3 * k + slow, "mean_iteration_s": mean,
                     "iterations": its})
    done = jobs
    return {"topology": "two-rack", "policy": "lyapunov", "priority": priority, "slot_s": 1.0,
            "emulation_bw_scale": 0.01, "jobs": jobs,
            "decisions": [{"t": 1.0, "job": "a", "gpus": 2, "ps_hosts": ["h1"],
                           "worker_hosts": ["h3", "h4"], "bw_nominal_mbps": 2500.0,
                           "bw_estimate_mbps": 1234.5, "C_n_s": 7.25, "C_n_nominal_s": 5.5,
                           "notes": {}}],
            "links": [{"t": float(t), "util": {"spine1-tor1": 0.2, "spine1-tor2": 0.1 * t}}
                      for t in range(5)],
            "uplinks": ["spine1-tor1", "spine1-tor2"],
            "summary": {"jobs": 2, "finished": 2,
                        "avg_jct_s": sum(j["turnaround"] for j in done) / 2,
                        "makespan_s": max(j["finish"] for j in done)}}
