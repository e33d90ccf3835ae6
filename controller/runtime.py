"""Hand-over point between ``sluice controller`` and the os-ken app.

os-ken instantiates apps itself (``AppManager.run_apps``), so the CLI puts the configured
:class:`~controller.service.ControllerService` here before starting os-ken and the app
picks it up in its constructor.
"""

from __future__ import annotations

SERVICE = None            # controller.service.ControllerService
STATS_INTERVAL = 1.0      # seconds between port-stats polls (and ARP probes of unknown hosts)
