"""The one rule for a job's name, which is its id everywhere: in the job file, the
scheduler, the launcher's port plan, the controller's registry and the report.

Checked when a job file is loaded (``job_schema``) and when the controller registers a
job (``controller.registry``), with the same pattern, so that a name the file accepts is
never refused at launch."""

from __future__ import annotations

import re

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
JOB_ID_RE = re.compile(JOB_ID_PATTERN)
JOB_ID_RULE = "1-64 letters, digits, . _ - (starting with a letter or digit)"


def is_job_id(value: object) -> bool:
    return isinstance(value, str) and JOB_ID_RE.match(value) is not None
