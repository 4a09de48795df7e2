"""Maps tool names to handlers. Built-in handlers register themselves with :func:`handler`."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from tools.handlers import Handler, Resumer

_HANDLERS: dict[str, Handler] = {}
_RESUMERS: dict[str, Resumer] = {}
_BUILTIN_MODULES = (
    "tools.builtin.crm",
    "tools.builtin.communication",
    "tools.builtin.calendar",
    "tools.builtin.data",
    "tools.builtin.web",
    "tools.builtin.flow",
    "tools.builtin.memory",
    "tools.mcp.handler",  # the tools of agencies' MCP servers, mcp_<server>__<tool> (issue 18)
    "teams.tool",  # delegate_to_agent (issue 19)
    "datasets.tools",  # list_datasets, get_dataset_schema, execute_sql, execute_query_plan (30)
    "datasets.python_tool",  # execute_python, in the sandbox (tools/sandbox/, issue 30)
)
_loaded = False
# Tools named by prefix, one function for all (MCP tools): it makes the handler of a given name.
_FAMILIES: dict[str, Callable[[str], Handler]] = {}


def handler(name: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of the tool called ``name``."""

    def register(function: Handler) -> Handler:
        if name in _HANDLERS and _HANDLERS[name] is not function:
            raise RuntimeError(f"two handlers for tool {name!r}")
        _HANDLERS[name] = function
        return function

    return register


def resumer(name: str) -> Callable[[Resumer], Resumer]:
    """Register the decorated function as what gives a waiting call of tool ``name`` its result
    when the run resumes (a handler that returned ``ToolResult(await_run=...)``)."""

    def register(function: Resumer) -> Resumer:
        _RESUMERS[name] = function
        return function

    return register


def get_resumer(name: str) -> Resumer | None:
    _load_builtins()
    return _RESUMERS.get(name)


def _load_builtins() -> None:
    global _loaded  # noqa: PLW0603 - one-time import of the handler modules
    if _loaded:
        return
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)
    _loaded = True


def handler_family(prefix: str) -> Callable[[Callable[[str], Handler]], Callable[[str], Handler]]:
    """Register the decorated function as what makes the handler of every tool whose name starts
    with ``prefix`` (and has no handler of its own)."""

    def register(make: Callable[[str], Handler]) -> Callable[[str], Handler]:
        _FAMILIES[prefix] = make
        return make

    return register


def get_handler(name: str) -> Handler | None:
    _load_builtins()
    found = _HANDLERS.get(name)
    if found is None:
        make = next((f for p, f in _FAMILIES.items() if name.startswith(p)), None)
        found = make(name) if make is not None else None
    return found


def is_installed(name: str) -> bool:
    """Whether a call of the tool ``name`` has a handler to run: its own, or its family's (an MCP
    server's tools). The one answer for the runtime's offer and the API's ``not_installed``."""
    return get_handler(name) is not None


def registered_names() -> list[str]:
    _load_builtins()
    return sorted(_HANDLERS)
