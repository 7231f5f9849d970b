"""Plain records for the modules a ``pgsteady lint`` run loads before it can lint.

A ``@dataclass`` costs its module about half a millisecond per class (the methods are written
out as source and compiled with ``exec``) and brings ``inspect``, with ``ast``, ``dis`` and
``tokenize``, into every process that imports it: together about a quarter of a cold lint of
a typical folder. So lint's records, and the shared ones it reads folders with, are written out
as slotted classes with their own ``__init__``; this base gives them, once, what a dataclass
would have generated: equality and a hash over their fields, a repr, and :meth:`replace`.

A record's fields are its ``__slots__`` (each ``__init__`` takes them by the same names);
``_UNCOMPARED`` names fields left out of equality, the hash and the repr, ``_UNSHOWN`` fields
left out of the repr only (a whole file's text). Records that change
after they are made set ``__hash__ = None``, as a dataclass without ``frozen`` has it; the
others mark their fields ``Final`` for mypy.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any, ClassVar, Self


class Record:
    """Equality, hash, repr and ``replace`` over the fields a subclass lists in ``__slots__``."""

    __slots__ = ()
    _UNCOMPARED: ClassVar[tuple[str, ...]] = ()
    _UNSHOWN: ClassVar[tuple[str, ...]] = ()

    def _fields(self) -> tuple[str, ...]:
        names: tuple[str, ...] = self.__slots__
        return names

    def _compared(self) -> tuple[object, ...]:
        skip = self._UNCOMPARED
        return tuple(getattr(self, name) for name in self._fields() if name not in skip)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        skip = self._UNCOMPARED + self._UNSHOWN
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields()
                          if name not in skip)
        return f"{type(self).__qualname__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` to its fields (as :func:`dataclasses.replace`, but field by
        field, so it also works for records whose ``__init__`` takes fewer arguments)."""
        fields = self._fields()
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field {', '.join(unknown)}")
        copy = object.__new__(type(self))
        for name in fields:
            object.__setattr__(copy, name, changes[name] if name in changes
                               else getattr(self, name))
        return copy
