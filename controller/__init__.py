"""The SDN controller: an os-ken (Ryu API) OpenFlow 1.3 app that forwards on the fabric
and prioritises each PS job's push/pull flows by training progress.

Pure core (no I/O, unit-tested against a fake flow table):
  ranking.py     flows + batches -> priority levels (smaller batch first, pull before push)
  registry.py    jobs, their endpoints and flows; API body validation
  forwarding.py  what the controller learned (LLDP links, ARP host ports) -> next hops
  rules.py       rules as data (forwarding, ARP/LLDP punt, per-flow DSCP/queue) and the diff
  flowtable.py   an in-memory flow table (the controller's shadow copy; the tests' switch)
  packets.py     LLDP/ARP frames built and parsed with os-ken's lib.packet
  linkstats.py   port counters -> bytes/s; metrics.py: Prometheus text
  config.py      ControllerConfig: every option, frozen, checked once (errors name fields)
  settling.py    rules kept on a reconnected switch until the fabric is known again
  reconcile.py   desired rules -> diff -> flow mods, in full or for what a report moved
Glue and shells:
  service.py     ControllerService: one facade over managers, one concern each, sharing
                 state.py's state and locks (their order is documented there):
                 fabric_events.py, job_ops.py, reports.py, views.py, persistence.py (the
                 state file and the journal); refuses with errors.py's exceptions (no
                 HTTP status codes); flow mods leave through sinks.py
  app.py         the os-ken app (events -> service, rule data -> OFPFlowMod); ofwire.py packs
                 the fixed-field matches fast
  auth.py        the northbound guard: admin and job tokens, per-job report rate
                 (ratelimit.py) charged by the service as it records a report
  api.py         northbound JSON/HTTP API (FastAPI on uvicorn): refusals -> status codes;
                 client.py: its client
  cli.py         `sluice controller`
"""
