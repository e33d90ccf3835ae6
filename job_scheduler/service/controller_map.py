"""A controller per pod (``sluice scheduler --controllers FILE``): which controller a job
is registered with.

Where one controller is not enough (docs/design.md, "A controller per pod"), each pod
of the topology (a Liquid ``domain``) has its own ``sluice controller --pod NAME``. The
file maps every pod to its controller's northbound URL::

    controllers:
      pod1: http://10.0.0.10:8080
      pod2: http://10.0.0.11:8080

Every pod of the topology must be there and nothing else (a job placed in a pod with no
controller would run unranked without anyone noticing); bad input names the file, the
field and the reason (exit 2), nothing started. All pods' controllers take the same
admin token (env SLUICE_CONTROLLER_TOKEN or SLUICE_ADMIN_TOKEN).

A job placed in one pod (Liquid places a job in one pod whenever one has room) is
registered with that pod's controller, its processes get that controller's URL and
their progress token (its workers report there themselves), and its end, cancel or
suspend removes it from the same controller: the controller is derived from the
placement the job was started with, which the job record keeps. A job whose placement
spans pods is registered with none: each pod's controller knows only its own hosts (it
refuses another pod's), so the job runs with its flows in the least urgent class, like
any unregistered traffic, and the job says so (``controller`` in ``GET /jobs/{id}``: state
``failed``, error "placement spans pods ...", and a ``controller-error`` event). Not
silently: the scheduler logs it and records it on the job; it is not retried (the same
placement would be refused again), the job's next start in one pod registers it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from job_scheduler.service.controller_link import ControllerNotifier
from job_scheduler.service.store import JobRecord
from sluice_common.errors import InputError, option_error
from topologies import Topology


class SpansPods(Exception):
    """The job's placement touches hosts of several pods, each with its own controller."""
    retry = False          # the same placement would be refused again


def parse_controller_map(data: Any, source: str, topology: Topology) -> dict[str, str]:
    """``{pod: URL}`` from the file's YAML data, checked against ``topology``'s pods."""
    if not isinstance(data, dict) or set(data) != {"controllers"} or \
            not isinstance(data["controllers"], dict):
        raise InputError(source, "must be a mapping {controllers: {POD: URL}}",
                         field="controllers")
    pods = sorted({r.domain for r in topology.racks})
    given = data["controllers"]
    for pod, url in given.items():
        field = f"controllers.{pod}"
        if pod not in pods:
            raise InputError(source, f"topology {topology.name} has no pod {pod!r} (its "
                             f"pods: {', '.join(pods)})", field=field)
        parts = urlsplit(url) if isinstance(url, str) else None
        try:
            port = parts.port if parts else None
        except ValueError:
            port = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or port is None \
                or parts.path not in ("", "/"):
            raise InputError(source, f"must be the controller's http(s)://HOST:PORT, got {url!r}",
                             field=field)
    missing = [p for p in pods if p not in given]
    if missing:
        raise InputError(source, f"no controller for pod(s) {', '.join(missing)} of topology "
                         f"{topology.name}: every pod needs one", field="controllers")
    return {pod: given[pod].rstrip("/") for pod in pods}


def load_controller_map(path: str | Path, topology: Topology) -> dict[str, str]:
    from job_scheduler.service.yaml_input import read_yaml

    return parse_controller_map(read_yaml(path), str(path), topology)


def pods_of(job: JobRecord, topology: Topology) -> list[str]:
    """The pods the job's recorded placement (PS and worker hosts) touches."""
    placement = job.placement or {}
    hosts = list(placement.get("ps_hosts", [])) + list(placement.get("worker_hosts", []))
    return sorted({topology.domain_of(h) for h in hosts})


class PodControllers:
    """The scheduler's link to a controller per pod: the same calls as
    :class:`~job_scheduler.service.controller_link.ControllerNotifier`, each sent to the
    controller of the job's pod."""

    def __init__(self, urls: dict[str, str], topology: Topology):
        self.topology = topology
        self.by_pod = {pod: ControllerNotifier(url, topology) for pod, url in urls.items()}
        self.where = ", ".join(f"{pod}={n.where}" for pod, n in self.by_pod.items())

    def job_started(self, job: JobRecord, base_port: int | None = None) -> dict[str, str]:
        pods = pods_of(job, self.topology)
        if len(pods) != 1:
            raise SpansPods(f"placement spans pods {', '.join(pods)}, each with its own "
                            "controller: registered with none, its flows travel unranked")
        return self.by_pod[pods[0]].job_started(job, base_port)

    def job_ended(self, job: JobRecord) -> None:
        pods = pods_of(job, self.topology)
        if len(pods) == 1:          # a job spanning pods was registered with none
            self.by_pod[pods[0]].job_ended(job)


def controller_link(controller: str | None, controllers: str | None, topology: Topology):
    """``--controller URL`` (one controller), ``--controllers FILE`` (one per pod) or
    neither (None)."""
    if controller and controllers:
        raise option_error("controllers", "one controller for the whole fabric, or one "
                           "per pod, not both (the single controller is also given)")
    if controllers:
        return PodControllers(load_controller_map(controllers, topology), topology)
    return ControllerNotifier(controller, topology) if controller else None
