"""A worker that decides its compute mode on its own device (``--compute auto``).

The launcher hands it both command lines, the torch worker's (``ps_runtime.worker``) and
the emulated one's (``ps_runtime.emulated_worker``); this process, started with its own
``CUDA_VISIBLE_DEVICES`` (``ps_runtime.gpu_binding``), looks at the device it was given:
a CUDA device it can use (and a model torch can build) -> real compute on it; else
emulated. So a job whose PS host has no GPU still trains for real on its GPU hosts, and
one worker's device never decides for another's.

    python -m ps_runtime.auto_worker --worker-index J TORCH_ARGS_JSON EMULATED_ARGS_JSON
"""

from __future__ import annotations

import json
import os
import runpy
import sys


def choose(model: str) -> str:
    """``torch`` where this process sees a usable CUDA device and torch has the model."""
    from ps_runtime.compute import cuda_present

    if not cuda_present():
        return "emulated"
    from ps_runtime.models import MODEL_NAMES

    return "torch" if model in MODEL_NAMES else "emulated"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 4 or argv[0] != "--worker-index":
        raise SystemExit("usage: python -m ps_runtime.auto_worker --worker-index J "
                         "TORCH_ARGS_JSON EMULATED_ARGS_JSON")
    torch_args, emulated_args = json.loads(argv[2]), json.loads(argv[3])
    mode = choose(torch_args[torch_args.index("--model") + 1])
    module, args = (("ps_runtime.worker", torch_args) if mode == "torch"
                    else ("ps_runtime.emulated_worker", emulated_args))
    print(f"worker {argv[1]}: compute {mode}, decided on its own device "
          f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')})",
          file=sys.stderr, flush=True)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
