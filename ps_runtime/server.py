"""A ps-lite scheduler or server process: ``python -m ps_runtime.server``.

MXNet runs the whole server (or scheduler) loop inside ``import mxnet`` when
``DMLC_ROLE`` is ``server`` or ``scheduler``, and returns once every worker has finalised.
The launcher sets the ``DMLC_*`` variables and ``PORT``.
"""

from __future__ import annotations

import os
import sys

from ps_runtime.quick_exit import exit_now
from ps_runtime.watchdog import start_watchdog


def main() -> int:
    role = os.environ.get("DMLC_ROLE")
    if role not in ("server", "scheduler"):
        print(f"ps_runtime.server: DMLC_ROLE must be server or scheduler, got {role!r}",
              file=sys.stderr)
        return 2
    start_watchdog()
    print(f"{role} listening on {os.environ.get('DMLC_NODE_HOST')}:{os.environ.get('PORT')} "
          f"({os.environ.get('DMLC_NUM_WORKER')} workers, {os.environ.get('DMLC_NUM_SERVER')} "
          "servers)", file=sys.stderr, flush=True)
    from ps_runtime.numpy_compat import import_mxnet

    try:
        import_mxnet()          # runs the ps-lite loop until the job ends (and exits)
        # A warm process (ps_runtime.warm) imported MXNet before it had a role: start the
        # server / scheduler loop now that DMLC_ROLE is set.
        from mxnet.kvstore import kvstore_server

        kvstore_server._init_kvstore_server_module()
    except SystemExit as done:
        # MXNet ends the loop with sys.exit() once ps::Finalize (the closing barrier)
        # has returned: every peer is done with us, so skip the slow interpreter exit.
        if done.code not in (None, 0):
            raise
    print(f"{role} done", file=sys.stderr, flush=True)
    exit_now(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
