"""The 17 built-in tools of seed 004, one module per category, acting on the agency's own data.

Each module registers its handlers with :func:`tools.registry.handler` when the registry imports
it. Handlers follow the contract in :mod:`tools.handlers`: they run inside the executor's
transaction under the execution's agency, filter by ``agency_id`` explicitly as well (row-level
security is the second line), return small JSON dicts and report expected failures as
:class:`tools.handlers.ToolError`. Argument helpers shared by the modules live in ``_args``.
"""
