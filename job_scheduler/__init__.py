"""The job scheduler, by concern: :mod:`.core` (the pure scheduling algorithm and its
policies), :mod:`.simulation` (the discrete-event simulator, ``sluice simulate``) and
:mod:`.service` (the scheduler service, ``sluice scheduler``). Both drive the core, which
imports neither; the simulation does not import the service."""
