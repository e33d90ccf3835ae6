"""``sluice schema jobs|topology``: the JSON Schema of a file users write.

Generated from the typed models that validate the files, so the schema and the checks
cannot drift apart. Editors with the YAML language server validate as one types when the
file starts with ``# yaml-language-server: $schema=<path or URL of the schema>``; the
repository ships copies under ``schemas/`` (``sluice schema jobs --out schemas/``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def schemas() -> dict[str, dict]:
    from sluice_common.job_schema import json_schema as jobs_schema
    from topologies.schema import json_schema as topology_schema
    return {"jobs": jobs_schema(), "topology": topology_schema()}


def schema_text(kind: str) -> str:
    return json.dumps(schemas()[kind], indent=2, sort_keys=True) + "\n"


def configure_schema(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=["jobs", "topology"], help="which file's schema")
    parser.add_argument("--out", metavar="DIR",
                        help="write DIR/<kind>.schema.json instead of printing it")


def run_schema(args: argparse.Namespace) -> int:
    text = schema_text(args.kind)
    if args.out:
        path = Path(args.out) / f"{args.kind}.schema.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    else:
        print(text, end="")
    return 0
