"""ps_runtime.quick_exit: a PS process that is done leaves at once, output flushed."""

import subprocess
import sys
from types import SimpleNamespace

from ps_runtime.quick_exit import drop_kvstore

CHILD = """
import atexit, sys
from ps_runtime.quick_exit import exit_now
atexit.register(lambda: print("atexit ran", flush=True))
print("batch 1 loss 0", end="")            # unflushed, on a pipe: block-buffered
sys.stderr.write("worker 0: done")
exit_now(3)
print("not reached")
"""


def test_exit_now_flushes_output_and_skips_the_interpreter_teardown():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3
    assert done.stdout == "batch 1 loss 0"          # flushed; atexit and the rest skipped
    assert done.stderr == "worker 0: done"


class FakeKVStore:
    """Stands for MXNet's KVStore: freeing it is what runs ps-lite's closing barrier."""


def test_drop_kvstore_says_whether_the_kvstore_was_freed():
    holder = SimpleNamespace(kv=FakeKVStore())
    assert drop_kvstore(holder) is True and holder.kv is None
    vote = SimpleNamespace(kv=FakeKVStore())          # a suspend vote holding it too
    holder = SimpleNamespace(kv=vote.kv)
    assert drop_kvstore(holder) is False and holder.kv is None
    vote.kv = None
