"""Reports arriving together are handed to the service together; each gets its own
answer or refusal (controller/progress_batch.py)."""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from controller.progress_batch import ProgressBatcher
from controller.api import status_of
from controller.errors import Refused, Unauthorized
from support.controller_fakes import ADMIN, make_service, northbound
from controller.fake_fabric import bring_up


class SlowService:
    """Records the size of every hand-over; refuses job 'bad'."""

    def __init__(self):
        self.calls, self.gate = [], threading.Event()

    def progress_many(self, reports):
        self.calls.append(len(reports))
        self.gate.wait(5)
        return [Unauthorized("wrong token") if job == "bad" else ({"job": job}, None)
                for job, *_ in reports]


def test_reports_of_one_loop_turn_go_in_one_call_and_later_ones_wait_for_the_next():
    svc = SlowService()

    async def main():
        batcher = ProgressBatcher(svc, ThreadPoolExecutor(1))
        first = [asyncio.ensure_future(batcher.report(f"j{i}", "t", {}, 0.0, None))
                 for i in range(10)] + [asyncio.ensure_future(batcher.report("bad", "t", {},
                                                                             0.0, None))]
        await asyncio.sleep(0.05)          # the first batch is in the service now
        later = [asyncio.ensure_future(batcher.report(f"k{i}", "t", {}, 0.0, None))
                 for i in range(5)]
        await asyncio.sleep(0.05)
        svc.gate.set()
        answers = await asyncio.gather(*first, *later, return_exceptions=True)
        return batcher, answers

    batcher, answers = asyncio.run(main())
    assert svc.calls == [11, 5]
    assert (batcher.batches, batcher.reports) == (2, 16)
    assert [a[0]["job"] for a in answers[:10]] == [f"j{i}" for i in range(10)]
    assert isinstance(answers[10], Refused) and status_of(answers[10]) == 401
    assert [a[0]["job"] for a in answers[11:]] == [f"k{i}" for i in range(5)]


def test_a_batch_through_the_real_service_answers_each_report_as_progress_would():
    svc = bring_up(make_service("two-rack", rank="progress"))
    body = {"id": "a", "servers": [{"id": "s0", "ip": "10.0.0.1", "port": 9000}],
            "workers": [{"id": "w0", "ip": "10.0.0.3", "port": 9001},
                        {"id": "w1", "ip": "10.0.0.4", "port": 9002}]}
    token = northbound(svc).register_job(ADMIN, body)["token"]
    out = northbound(svc).progress_many([("a", token, {"worker": "w0", "batch": 3}, 0.0, None),
                             ("a", token, {"worker": "w1", "batch": 1}, 0.0, None),
                             ("a", "wrong", {"worker": "w1", "batch": 2}, 0.0, None),
                             ("a", token, {"worker": "w0", "batch": 2}, 0.0, None)])
    assert out[0][0]["result"] == "accepted" and out[1][0]["result"] == "accepted"
    assert isinstance(out[2], Refused) and status_of(out[2]) == 401
    assert out[3][0]["result"] == "stale"
    # one reconcile covered both accepted reports: w1 (batch 1) is ahead of w0 (batch 3)
    assert svc.registry.jobs["a"].batches == {"w0": 3, "w1": 1}
    levels = {(f.worker, f.kind): lv for f, lv in svc.reconciler.levels.items()}
    assert levels[("w1", "pull")] < levels[("w0", "pull")]
    assert out[0][0]["changed_rules"] == out[1][0]["changed_rules"] > 0
