"""Registry names of MCP tools: valid function names the tool patterns can express, distinct per
server, stable across refreshes."""

from __future__ import annotations

import re

import pytest

from tools.mcp.naming import registry_name
from tools.models import TOOL_NAME_REGEX
from tools.patterns import decide


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("add", "mcp_weather__add"),
        ("get_forecast", "mcp_weather__get_forecast"),
        ("Get-Weather.v2", re.compile(r"^mcp_weather__get_weather_v2_[0-9a-f]{8}$")),
        ("a__b", re.compile(r"^mcp_weather__a_b_[0-9a-f]{8}$")),
        ("---", re.compile(r"^mcp_weather__tool_[0-9a-f]{8}$")),
        ("x" * 200, re.compile(r"^mcp_weather__x+_[0-9a-f]{8}$")),
    ],
)
def test_registry_names_are_valid_tool_names(remote: str, expected: str | re.Pattern[str]) -> None:
    name = registry_name("weather", remote)
    assert re.fullmatch(TOOL_NAME_REGEX, name)
    assert len(name) <= 64
    if isinstance(expected, str):
        assert name == expected
    else:
        assert expected.fullmatch(name), name
    assert registry_name("weather", remote) == name  # stable


def test_names_that_clean_to_the_same_text_stay_distinct() -> None:
    names = {registry_name("s", n) for n in ("get-user", "get.user", "Get_User", "get_user")}
    assert len(names) == 4


def test_the_patterns_select_a_server_or_all_mcp_tools() -> None:
    name = registry_name("weather", "get_forecast")
    assert decide(name, ["mcp_*"], []).allowed
    assert decide(name, ["mcp_weather__*"], []).allowed
    assert not decide(name, ["mcp_weather2__*"], []).allowed
    assert not decide(name, ["*"], ["mcp_*"]).allowed
    assert not decide(name, ["*"], ["mcp_*__get_*"]).allowed
