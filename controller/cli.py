"""``sluice controller``: the os-ken OpenFlow 1.3 controller plus its northbound API.

os-ken 4.x has no ``osken-manager``: we import ``os_ken.base.app_manager`` and then
``os_ken.controller.controller`` (which registers the listen options; imported alone it
is a circular import in 4.2.2), parse them with ``cfg.CONF(args=[...], project='os_ken')``
and start the app with ``AppManager.run_apps``. Measured with os-ken 4.2.2 here: the
native hub runs plain threads that cannot be killed (``hub.kill`` is a no-op) and
``run_apps`` would wait on them forever, so SIGINT/SIGTERM saves the state, stops the
HTTP server, flushes the log and ends the process with ``os._exit``. ``run_apps`` runs in
a thread of its own so that the main thread can wait in short slices (see below).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from sluice_common.errors import InputError, as_flags
from sluice_common import rank_rules

if TYPE_CHECKING:
    from controller.config import ControllerConfig

LOG = logging.getLogger("sluice.controller")


def configure_controller(parser) -> None:
    parser.add_argument("--topology", default="two-rack",
                        help="built-in topology name or YAML path (default: two-rack)")
    parser.add_argument("--pod", default=None, metavar="NAME",
                        help="a controller per pod: manage only pod NAME of --topology (a "
                        "domain: its racks' ToRs and the switches joining them), and reach "
                        "the other pods by their prefixes through the core; 'core': manage "
                        "the core layer's switches (prefix routes only, no jobs). Default: "
                        "the whole fabric")
    parser.add_argument("--ofp-port", type=int, default=6653,
                        help="OpenFlow listen port (default: %(default)s)")
    parser.add_argument("--ofp-host", default="127.0.0.1",
                        help="OpenFlow listen address (default 127.0.0.1: the emulated "
                        "switches are on this machine; real switches need the address "
                        "they reach, e.g. 0.0.0.0)")
    parser.add_argument("--api", default="127.0.0.1:8080",
                        help="northbound API HOST:PORT (default 127.0.0.1:8080)")
    parser.add_argument("--enforce", default="dscp", choices=["dscp", "queue"],
                        help="dscp: set_field ip_dscp (userspace OVS + HTB/u32); "
                             "queue: set_queue (kernel OVS, hardware) (default: %(default)s)")
    parser.add_argument("--levels", type=int, default=8,
                        help="priority levels to use (1..8) (default: %(default)s)")
    parser.add_argument("--rank", default=None, choices=rank_rules.names(),
                        help=f"ranking rule (default {rank_rules.DEFAULT_RULE}): "
                             f"{rank_rules.help_text()}; changeable at run time with POST "
                             "/rank. Without it, the rule saved in --state-file (the last one "
                             "chosen) is used")
    parser.add_argument("--attained-base-mb", type=float, default=4.0,
                        help="attained: first demotion after this many MB (default 4)")
    parser.add_argument("--attained-factor", type=float, default=4.0,
                        help="attained: each further level after this factor more (default 4)")
    parser.add_argument("--report-hints", default=os.environ.get("SLUICE_REPORT_HINTS", "on"),
                        choices=["on", "off"],
                        help="on (default, or env SLUICE_REPORT_HINTS): each progress "
                             "answer tells the worker when its next report matters (reports "
                             "grow with level changes, not batches); off: no hint, workers "
                             "report every batch they can (at most every 0.2 s)")
    parser.add_argument("--trust-host-dscp", action="store_true",
                        help="keep the DSCP each host gives its packets (end-host tagging, "
                             "e.g. PIAS) instead of re-marking them to the least urgent "
                             "class; a trade-off: any host can then buy priority, so only "
                             "where the hosts are trusted (default: off)")
    parser.add_argument("--report-staleness", type=float, default=1.0,
                        help="seconds: the longest a report may wait under the progress "
                             "rule, and for jobs others are ranked against (default 1)")
    parser.add_argument("--report-heartbeat", type=float, default=120.0,
                        help="seconds: every other job reports at least this often "
                             "(default 120)")
    parser.add_argument("--state-file", default=None,
                        help="JSON file keeping registered jobs across restarts")
    parser.add_argument("--admin-token", default=None,
                        help="admin bearer token (better: env SLUICE_ADMIN_TOKEN, "
                             "which ps cannot show)")
    parser.add_argument("--rate-limit", type=float, default=1000.0,
                        help="progress reports per job per second (default 1000)")
    parser.add_argument("--stats-interval", type=float, default=1.0,
                        help="seconds between port-stats polls (default 1)")
    parser.add_argument("--tls-cert", default=None,
                        help="PEM certificate: the northbound API speaks HTTPS only "
                             "(needs --tls-key)")
    parser.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    parser.add_argument("--ofp-tls-cert", default=None,
                        help="PEM certificate: the OpenFlow channel speaks TLS (switches: "
                             "ovs-vsctl set-controller BR ssl:HOST:PORT); needs --ofp-tls-key")
    parser.add_argument("--ofp-tls-key", default=None, help="PEM private key of --ofp-tls-cert")
    parser.add_argument("--ofp-tls-ca", default=None,
                        help="PEM CA bundle: switches must present a certificate it signed")
    parser.add_argument("--echo-interval", type=float, default=0.5,
                        help="seconds between OpenFlow echo requests to each switch "
                             "(default 0.5)")
    parser.add_argument("--echo-misses", type=int, default=3,
                        help="unanswered echo requests after which a switch counts as "
                             "dead and is routed around (default 3; 0 = never)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="the least severe log lines written to stderr (os-ken's own: "
                             "warning at least) (default: %(default)s)")


# ControllerConfig field -> the flag that sets it: the one place that names flags (the
# config and everything below it name fields).
FLAG_OF_FIELD = {
    "levels": "--levels", "enforce": "--enforce", "admin_token": "--admin-token",
    "rate_per_s": "--rate-limit", "rank": "--rank",
    "attained_base_bytes/attained_factor": "--attained-base-mb/--attained-factor",
    "ofp_host": "--ofp-host", "ofp_port": "--ofp-port", "api_host": "--api", "api_port": "--api",
    "stats_interval": "--stats-interval", "echo_interval": "--echo-interval",
    "echo_misses": "--echo-misses", "log_level": "--log-level",
    "report_staleness_s": "--report-staleness", "report_heartbeat_s": "--report-heartbeat",
}


def as_flag_error(err: InputError) -> InputError:
    """A config error naming a field -> the same error naming the flag that sets it."""
    from controller.config import CONFIG_SOURCE

    if err.source != CONFIG_SOURCE or err.field not in FLAG_OF_FIELD:
        return err
    return InputError(f"argument {FLAG_OF_FIELD[err.field]}", err.reason)


def _on_off(text: str) -> bool:
    # argparse does not check a default against choices: the environment's value here
    if text not in ("on", "off"):
        raise InputError("argument --report-hints (env SLUICE_REPORT_HINTS)",
                         f"must be on or off, got {text!r}")
    return text == "on"


def _host_port(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise InputError(f"argument {what}", f"must look like HOST:PORT, got {text!r}")
    try:
        socket.inet_aton(host)
    except OSError:
        raise InputError(f"argument {what}", f"host must be an IPv4 address, got {host!r}")
    if not port.isdigit():
        raise InputError(f"argument {what}", f"port must be 1..65535, got {port!r}")
    return host, int(port)       # its range: ControllerConfig


def _check_free(host: str, port: int, what: str) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as err:
            raise InputError(f"argument {what}", f"cannot listen on {host}:{port}: "
                             f"{err.strerror}")


def _ofp_tls_options(cert: str | None, key: str | None, ca: str | None) -> tuple[str, ...]:
    """os-ken's controller-certificate options, after checking the files load."""
    import ssl

    if not cert and not key:
        if ca:
            raise InputError("argument --ofp-tls-ca", "needs --ofp-tls-cert and --ofp-tls-key")
        return ()
    if not (cert and key):
        raise InputError("argument --ofp-tls-cert/--ofp-tls-key", "give both or neither")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        raise InputError(cert, f"cannot load certificate/key: {err}")
    out = ("--ctl-cert", cert, "--ctl-privkey", key)
    if ca:
        try:
            ctx.load_verify_locations(ca)
        except (OSError, ssl.SSLError) as err:
            raise InputError(ca, f"cannot load CA certificates: {err}")
        out += ("--ca-certs", ca)
    return out


def config_of(args) -> ControllerConfig:
    """The command line -> the controller's :class:`~controller.config.ControllerConfig`,
    built once here; nothing below reads ``args``."""
    from controller.config import ControllerConfig
    from sluice_common.http_service import check_tls_files
    from sluice_common.tokens import check_admin_token
    from topologies import load_topology

    topology, scope = load_topology(args.topology), None
    if args.pod is not None:
        from controller.pods import pod_scope, scoped_topology
        try:
            scope = pod_scope(topology, args.pod)
        except InputError as err:
            raise as_flags(err, {"pod": "--pod"}) from None
        topology = scoped_topology(topology, scope)
    api_host, api_port = _host_port(args.api, "--api")
    token = check_admin_token(args.admin_token or os.environ.get("SLUICE_ADMIN_TOKEN", ""),
                              "SLUICE_ADMIN_TOKEN", "--admin-token", required=True)
    ofp_tls = _ofp_tls_options(args.ofp_tls_cert, args.ofp_tls_key, args.ofp_tls_ca)
    try:
        api_tls = check_tls_files(args.tls_cert, args.tls_key)
    except InputError as err:
        raise as_flags(err, {"tls": "--tls-cert/--tls-key"}) from None
    state_file = Path(args.state_file) if args.state_file else None
    if state_file and not state_file.parent.is_dir():
        raise InputError(str(state_file), "its directory does not exist")
    try:
        return ControllerConfig(
            topology=topology, levels=args.levels, enforce=args.enforce, admin_token=token,
            state_file=state_file, rate_per_s=args.rate_limit, rank=args.rank,
            attained_base_bytes=args.attained_base_mb * (1 << 20),
            attained_factor=args.attained_factor, report_hints=_on_off(args.report_hints),
            trust_host_dscp=args.trust_host_dscp,
            report_staleness_s=args.report_staleness,
            report_heartbeat_s=args.report_heartbeat, ofp_host=args.ofp_host,
            ofp_port=args.ofp_port, api_host=api_host, api_port=api_port,
            stats_interval=args.stats_interval, echo_interval=args.echo_interval,
            echo_misses=args.echo_misses, api_tls=api_tls, ofp_tls=ofp_tls,
            log_level=args.log_level, scope=scope)
    except InputError as err:
        raise as_flag_error(err) from None


def run_controller(args) -> int:
    from sluice_common.malloc import return_large_buffers_to_the_system
    return_large_buffers_to_the_system()     # a long-lived service: see that module
    # ---- validate everything before starting anything --------------------------------
    from controller.service import ControllerService

    config = config_of(args)
    service = ControllerService(config)        # reads the state file (errors name it)
    _check_free(config.ofp_host, config.ofp_port, "--ofp-port")
    _check_free(config.api_host, config.api_port, "--api")

    level = getattr(logging, config.log_level.upper())
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("os_ken").setLevel(max(logging.WARNING, level))

    # ---- start ------------------------------------------------------------------------
    # app_manager before os_ken.controller.controller: the latter alone is a circular
    # import in os-ken 4.2.2 (measured); it registers the ofp listen options.
    importlib.import_module("os_ken.base.app_manager")
    importlib.import_module("os_ken.controller.controller")
    from os_ken import cfg

    from controller.api import ApiServer

    # With a certificate os-ken listens with TLS on its "ssl" port only.
    tls = config.ofp_tls
    listen = ["--ofp-ssl-listen-port", str(config.ofp_port), *tls] if tls else \
        ["--ofp-tcp-listen-port", str(config.ofp_port)]
    cfg.CONF(args=[*listen, "--ofp-listen-host", config.ofp_host], project="os_ken")
    # Echo liveness (off in os-ken by default): a switch that stops answering is
    # disconnected, and the service then routes around it where another path exists.
    cfg.CONF.set_override("echo_request_interval", config.echo_interval)
    cfg.CONF.set_override("maximum_unreplied_echo_requests", config.echo_misses)
    api = None

    def stop(signum, _frame):
        LOG.info("signal %d: saving state and stopping", signum)
        try:
            if api is not None:
                api.stop()
            service.save_state()
        finally:
            logging.shutdown()
            sys.stderr.flush()
            os._exit(0)

    # Handlers first: a SIGTERM that arrives as soon as the API answers must still be clean.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    api = ApiServer(service, config.api_host, config.api_port, tls=config.api_tls).start()
    if config.scope is not None:
        LOG.info("pod %s: %d switches of its own; %d prefix route(s) to other pods",
                 config.scope.name, len(config.scope.owned), len(config.scope.remote))
    LOG.info("topology %s: %d switches, %d hosts; OpenFlow%s on %s:%d; API on %s; enforce=%s "
             "levels=%d rank=%s", config.topology.name, len(config.topology.switches),
             len(config.topology.hosts),
             " (TLS)" if tls else "", config.ofp_host, config.ofp_port, api.url,
             config.enforce, config.levels, service.rank()["rule"])
    # os-ken runs in a thread and the main thread waits with a timeout: a plain join()
    # blocks in a lock that a SIGTERM delivered to another thread does not interrupt
    # (measured: one start in ~7 ignored SIGTERM), while join(0.5) returns to Python
    # twice a second, so the handler above always runs.
    runner = threading.Thread(target=run_os_ken, args=(service, config.stats_interval),
                              name="os-ken", daemon=True)
    runner.start()
    while runner.is_alive():
        runner.join(0.5)
    LOG.error("os-ken stopped on its own")
    return 1


def run_os_ken(service, stats_interval: float) -> None:
    """``AppManager.run_apps(["controller.app"])`` with the configured service handed to
    the app as an os-ken context: os-ken passes its contexts to every app's constructor
    as keyword arguments (what ``_CONTEXTS`` entries become); a ``_CONTEXTS`` class would
    be built by os-ken with no arguments, so the service, built here from the command
    line, joins the contexts instead."""
    from os_ken.base import app_manager
    from os_ken.lib import hub

    from controller.app import SERVICE_CONTEXT, STATS_INTERVAL_CONTEXT

    manager = app_manager.AppManager.get_instance()
    manager.load_apps(["controller.app"])
    contexts = {**manager.create_contexts(), SERVICE_CONTEXT: service,
                STATS_INTERVAL_CONTEXT: stats_interval}
    threads = manager.instantiate_apps(**contexts)
    try:
        hub.joinall(threads)
    finally:
        manager.close()
