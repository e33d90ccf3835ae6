"""How long one emulated PS batch's push + pull takes alone on a link: moved to
:mod:`sluice_common.exchange` (the one exchange model); kept as a name here for
the experiment's imports."""

from sluice_common.exchange import key_times

__all__ = ["key_times"]
