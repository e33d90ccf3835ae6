"""A refused job file is freed when its answer is sent, not at some later garbage
collection (otherwise twenty clients sending large bad files leave the scheduler at
2.4-2.7x its resident memory; bench/api/bench_hostile.py).

The submission runs in the threadpool; an exception re-raised from anyio's future formed
a reference cycle with the frames it passed through, so the body and its text stayed
until a full collection. With the collector off, reference counting alone must free the
body once the call has failed (and the worker thread has moved on to another job: an
idle anyio worker keeps its last job's arguments).
"""

from __future__ import annotations

import gc
import weakref

import anyio
from starlette.concurrency import run_in_threadpool

from job_scheduler.service.api import _in_thread_no_traceback
from sluice_common.errors import InputError


class Body:
    """Stands for a request body (bytes cannot be weakly referenced)."""


def refuse(body: Body) -> None:
    raise InputError("API body", "refused")


def body_alive_after_a_refusal(call) -> bool:
    refs: list[weakref.ref] = []

    async def submit() -> None:
        body = Body()
        refs.append(weakref.ref(body))
        try:
            await call(refuse, body)
        except InputError:
            pass
        del body
        # an idle worker thread keeps its last job's arguments until its next job
        await run_in_threadpool(int)

    gc.collect()
    gc.disable()
    try:
        anyio.run(submit)
        return refs[0]() is not None
    finally:
        gc.enable()


def test_a_refused_body_is_freed_by_reference_counting_alone():
    assert not body_alive_after_a_refusal(_in_thread_no_traceback)


def test_plain_run_in_threadpool_keeps_it_until_a_collection():
    # why the helper exists: this is the cycle it breaks (if a starlette/anyio release
    # stops making it, the helper may go)
    assert body_alive_after_a_refusal(run_in_threadpool)
