"""Maps tool names to handlers. Built-in handlers register themselves with :func:`handler`."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from tools.handlers import Handler

_HANDLERS: dict[str, Handler] = {}
_BUILTIN_MODULES = (
    "tools.builtin.crm",
    "tools.builtin.communication",
    "tools.builtin.calendar",
    "tools.builtin.data",
    "tools.builtin.web",
    "tools.builtin.flow",
    "tools.builtin.memory",
)
_loaded = False


def handler(name: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of the tool called ``name``."""

    def register(function: Handler) -> Handler:
        if name in _HANDLERS and _HANDLERS[name] is not function:
            raise RuntimeError(f"two handlers for tool {name!r}")
        _HANDLERS[name] = function
        return function

    return register


def _load_builtins() -> None:
    global _loaded  # noqa: PLW0603 - one-time import of the handler modules
    if _loaded:
        return
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)
    _loaded = True


def get_handler(name: str) -> Handler | None:
    _load_builtins()
    return _HANDLERS.get(name)


def registered_names() -> list[str]:
    _load_builtins()
    return sorted(_HANDLERS)
