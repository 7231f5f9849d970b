"""pglast's C parser, loaded without building pglast's AST classes and enums first.

``import pglast`` executes ``pglast.ast`` and ``pglast.enums`` (hundreds of classes and
enums; on the 2-core machine about 25 ms, most of a small lint run) because the parser module
imports them. The linter only calls the parser's C functions (``split``, ``scan``,
``parse_sql_json``, ``parse_plpgsql_json``) and reads JSON, so here ``pglast``, ``pglast.ast``
and ``pglast.enums`` are registered as the real modules, from pglast's own specs, with their
code not run yet; each runs the first time anyone reads a name it lacks. Code that later uses
pglast in full in the same process (migrate's analysis, ``from pglast import parse_sql``)
gets the real, complete modules. If pglast is already imported, or anything here fails, the
ordinary import is used.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading
from types import ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

_DEFERRED = ("ast", "enums")


#: One load at a time: another thread reading a deferred module meanwhile waits for it.
_LOADING = threading.RLock()


class _Deferred(ModuleType):
    """A module whose code runs on the first read of a name it does not have yet."""

    def __getattr__(self, name: str) -> object:
        with _LOADING:
            if type(self) is not _Deferred:  # another thread completed it while we waited
                return getattr(self, name)
            if self.__dict__.get("_pgsteady_loading"):  # the import system probing, mid-load
                raise AttributeError(name)
            spec = self.__spec__
            if spec is None or spec.loader is None:
                raise AttributeError(name)
            self.__dict__["_pgsteady_loading"] = True
            try:
                spec.loader.exec_module(self)
            finally:
                del self.__dict__["_pgsteady_loading"]
            object.__setattr__(self, "__class__", ModuleType)  # complete: plain lookups now
        return getattr(self, name)


def _deferred(spec: ModuleSpec) -> _Deferred:
    module = _Deferred(spec.name)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    if spec.submodule_search_locations is not None:
        module.__path__ = list(spec.submodule_search_locations)
        module.__package__ = spec.name
    else:
        module.__package__ = spec.parent
    return module


def parser() -> ModuleType:
    """``pglast.parser``, with pglast's package, AST and enums deferred when possible."""
    loaded = sys.modules.get("pglast.parser")
    if loaded is not None:
        return loaded
    if "pglast" in sys.modules:
        return importlib.import_module("pglast.parser")
    try:
        return _load_deferred()
    except Exception:  # an unexpected pglast layout: the ordinary import
        for name in ("pglast.parser", "pglast.error", *(f"pglast.{n}" for n in _DEFERRED),
                     "pglast"):
            sys.modules.pop(name, None)
        return importlib.import_module("pglast.parser")


def _load_deferred() -> ModuleType:
    spec = importlib.machinery.PathFinder.find_spec("pglast")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("pglast not found")
    package = _deferred(spec)
    sys.modules["pglast"] = package
    for name in _DEFERRED:
        sub = importlib.machinery.PathFinder.find_spec(f"pglast.{name}",
                                                       package.__path__)
        if sub is None:
            raise ImportError(f"pglast.{name} not found")
        sys.modules[sub.name] = module = _deferred(sub)
        package.__dict__[name] = module
    package.__dict__["Error"] = importlib.import_module("pglast.error").Error
    return importlib.import_module("pglast.parser")
