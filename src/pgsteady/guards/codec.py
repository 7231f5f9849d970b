"""``TypedJson``: the cache's default codec, so a value comes back from Redis as the same
types it went in with, as it does from memory.

Plain ``json`` turned a tuple into a list and ``{1: 'a'}`` into ``{'1': 'a'}`` on the way
through Redis, while the memory backend handed back the object itself: code tested against
one broke against the other. Here a value made only of JSON's own types (str-keyed dicts,
lists, str, int, float, bool, None) is stored as plain JSON, readable by any client; any
other value is stored as ``~`` + JSON in which the rest is tagged (``{"~": "tuple", "v": [...]}``):

    tuple, dict with non-str keys (int, float, bool, None, tuple, ...), bytes, datetime, date,
    time, timedelta, Decimal, UUID

Anything else (a set, a dataclass, a namedtuple, an IntEnum, a dict subclass: what would not
come back as itself) raises :class:`TypeError` naming the type and where it is in the value,
when it is stored, with either backend. Nothing is ever unpickled: data never becomes code.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

_PLAIN = (str, int, float, bool, type(None))
_TAG = "~"
_MARK = b"~"

# Tagged types: name -> (type, to JSON, from JSON). Exact types only: a subclass would come
# back as its base class.
_TAGGED: dict[str, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {
    "bytes": (bytes, lambda v: base64.b64encode(v).decode(),
              lambda v: base64.b64decode(v, validate=True)),
    "datetime": (dt.datetime, dt.datetime.isoformat, dt.datetime.fromisoformat),
    "date": (dt.date, dt.date.isoformat, dt.date.fromisoformat),
    "time": (dt.time, dt.time.isoformat, dt.time.fromisoformat),
    "timedelta": (dt.timedelta, lambda v: [v.days, v.seconds, v.microseconds],
                  lambda v: dt.timedelta(*v)),
    "decimal": (Decimal, str, Decimal),
    "uuid": (uuid.UUID, str, uuid.UUID),
}
_TAG_OF = {kind: name for name, (kind, _, _) in _TAGGED.items()}
KEPT = ("str", "int", "float", "bool", "None", "list", "dict", "tuple", "bytes", "datetime",
        "date", "time", "timedelta", "Decimal", "UUID")
"""The types ``TypedJson`` keeps (dict keys: any of them that is hashable)."""


class TypedJson:
    """The default ``codec`` of :class:`~pgsteady.guards.StaleCache` (see the module
    docstring). Stateless; ``dumps`` checks the whole value, ``loads`` is ``json.loads``
    for plain values."""

    def dumps(self, obj: Any) -> bytes:
        if _plain(obj):
            return json.dumps(obj).encode()
        return _MARK + json.dumps(_tagged(obj, "value"), separators=(",", ":")).encode()

    def check(self, obj: Any) -> None:
        """Raise what :meth:`dumps` would, without encoding (the memory backend's check)."""
        if not _plain(obj):
            _tagged(obj, "value")

    def loads(self, s: str | bytes) -> Any:
        """The value ``s`` holds; :class:`ValueError` for anything else (a damaged entry, or
        another program's under the same key: a cache treats that as a miss)."""
        data = s.encode() if isinstance(s, str) else s
        try:
            if data[:1] == _MARK:
                return json.loads(data[1:], object_hook=_untag)
            return json.loads(data)
        except ValueError:
            raise
        # What a tag with the wrong contents, a huge timedelta or JSON nested past Python's
        # recursion limit raise instead of ValueError.
        except (TypeError, KeyError, IndexError, AttributeError, OverflowError,
                RecursionError) as exc:
            raise ValueError(f"not a cache entry TypedJson wrote ({type(exc).__name__})") \
                from None


def _plain(obj: Any) -> bool:
    """Whether plain JSON brings ``obj`` back unchanged."""
    kind = type(obj)
    if kind in _PLAIN:
        return True
    if kind is list:
        return all(_plain(item) for item in obj)
    if kind is dict:
        return all(type(key) is str and _plain(value) for key, value in obj.items())
    return False


def _tagged(obj: Any, where: str) -> Any:
    """``obj`` as JSON-ready data with every non-JSON type tagged; TypeError if impossible."""
    kind = type(obj)
    if kind in _PLAIN:
        return obj
    if kind is list:
        return [_tagged(item, f"{where}[{i}]") for i, item in enumerate(obj)]
    if kind is tuple:
        return {_TAG: "tuple", "v": [_tagged(item, f"{where}[{i}]")
                                     for i, item in enumerate(obj)]}
    if kind is dict:
        if all(type(key) is str and key != _TAG for key in obj):
            return {key: _tagged(value, f"{where}[{key!r}]") for key, value in obj.items()}
        pairs = [[_tagged(key, f"a key of {where}"), _tagged(value, f"{where}[{key!r}]")]
                 for key, value in obj.items()]
        return {_TAG: "dict", "v": pairs}
    name = _TAG_OF.get(kind)
    if name is not None:
        return {_TAG: name, "v": _TAGGED[name][1](obj)}
    named = kind.__qualname__ if kind.__module__ == "builtins" else \
        f"{kind.__module__}.{kind.__qualname__}"
    raise TypeError(
        f"the cache cannot keep a value of type {named} ({where}): it would "
        f"not come back as itself; it keeps {', '.join(KEPT)}. Convert it (a set to a sorted "
        f"list, a dataclass to a dict) or pass codec= a codec that can")


def _untag(obj: dict[str, Any]) -> Any:
    name = obj.get(_TAG)
    if name is None:
        return obj
    value = obj["v"]
    if name == "tuple":
        if type(value) is not list:
            raise ValueError("a tagged tuple that is not a list in a cache entry")
        return tuple(value)
    if name == "dict":
        return {key: item for key, item in value}
    try:
        return _TAGGED[name][2](value)
    except KeyError:
        raise ValueError(f"unknown tag {name!r} in a cache entry") from None


TYPED_JSON = TypedJson()
