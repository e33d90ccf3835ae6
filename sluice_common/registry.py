"""A named registry (pure): the one list of an open axis's members (network baselines,
priority rules, executors), in registration order. Each axis keeps its entry type and
its module (``mininet_fabric/baselines.py``, ``sluice_common/rank_rules.py``,
``job_scheduler/service/executor_registry.py``); this is what they share."""

from __future__ import annotations

from typing import Generic, Iterator, Protocol, TypeVar


class Entry(Protocol):
    name: str
    summary: str          # one clause, for help texts


E = TypeVar("E", bound=Entry)


class Registry(Generic[E]):
    def __init__(self, what: str):
        self.what = what            # the axis, for messages: "baseline", "rule", ...
        self._entries: dict[str, E] = {}

    def register(self, entry: E) -> E:
        """Add ``entry`` (or replace the one of its name)."""
        self._entries[entry.name] = entry
        return entry

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order."""
        return tuple(self._entries)

    def get(self, name: str) -> E:
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"{self.what} must be one of {', '.join(self._entries)}, "
                             f"got {name!r}") from None

    def help_text(self) -> str:
        """The entries, one clause each, for a command line's help."""
        return "; ".join(f"{e.name}: {e.summary}" for e in self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[E]:
        return iter(self._entries.values())
