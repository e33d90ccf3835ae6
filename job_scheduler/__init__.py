"""The job scheduler, by concern: :mod:`.core` (the pure scheduling algorithm and its
policies), :mod:`.simulation` (the discrete-event simulator, ``sluice simulate``) and
:mod:`.service` (the scheduler service, ``sluice scheduler``); the simulation and the
service both drive the core and do not import each other."""
