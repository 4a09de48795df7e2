"""Schemathesis hooks of tests/api/test_contract.py (loaded by schemathesis, by path).

The fuzzer may revoke any API key it finds in a list, its own included, after which every answer
is a 401 and nothing more is tested: a revocation aimed at the fuzzing key revokes a spare key of
the same agency instead (the test names both in the environment).
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis

OWN_KEY_ID = os.environ["AGENTDESK_FUZZ_KEY_ID"]
SPARE_KEY_ID = os.environ["AGENTDESK_FUZZ_SPARE_KEY_ID"]


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    parameters = case.path_parameters or {}
    for name, value in list(parameters.items()):
        if str(value) == OWN_KEY_ID:
            parameters[name] = SPARE_KEY_ID


def _nul_in_a_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any("\x00" in str(key) or _nul_in_a_key(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_nul_in_a_key(item) for item in value)
    return False


@schemathesis.hook
def filter_body(context: Any, body: Any) -> bool:
    """No body with a NUL in an object's key: PostgreSQL cannot store NUL, the API refuses it
    anywhere with a 400 (tests/api/test_errors_and_schema.py), and OpenAPI 3.0 cannot say so of
    a free-form object's keys (no propertyNames): such a body is valid by the schema only."""
    return not _nul_in_a_key(body)
