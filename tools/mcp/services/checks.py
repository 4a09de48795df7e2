"""What an MCP server's fields and headers may be: the checks its writers run before anything is
written (a 400 naming the fields, or a 422 for a rule the API schema cannot state), and the
headers' rules as a JSON schema for the API."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from core.exceptions import ApplicationError
from tools.mcp.addresses import AddressRefused, allowed_addresses, check
from tools.mcp.models import MAX_TIMEOUT_SECONDS, SLUG_MAX_LENGTH, SLUG_REGEX
from tools.net.addresses import system_resolver

MAX_HEADERS = 20
MAX_HEADER_VALUE = 4000
# Set by the MCP transport itself, or about the connection: never from a stored header.
RESERVED_HEADERS = frozenset(
    {
        "host", "content-length", "content-type", "accept", "connection", "transfer-encoding",
        "mcp-session-id", "mcp-protocol-version", "last-event-id", "upgrade", "te", "trailer",
        "keep-alive", "proxy-authorization", "proxy-connection",
    }
)  # fmt: skip
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP field name (RFC 9110 token)
# clean_headers' rules on names and values, for the API schema (reserved names and a name given
# twice in another case remain the service's to refuse).
HEADERS_SCHEMA = {
    "type": "object",
    "maxProperties": MAX_HEADERS,
    "propertyNames": {"pattern": _TOKEN.pattern, "maxLength": 100},
    "additionalProperties": {
        "type": "string",
        "maxLength": MAX_HEADER_VALUE,
        "pattern": r"^(?:[^\s\x00](?:[^\r\n\x00]*[^\s\x00])?)?$",
    },
}
EDITABLE_FIELDS = frozenset(
    {
        "name", "slug", "url", "is_enabled", "timeout_seconds", "require_approval",
        "rate_limit_per_minute", "rate_limit_per_hour",
    }
)  # fmt: skip


def _invalid(
    fields: dict[str, list[str]], message: str = "The MCP server is invalid.", *, status: int = 400
) -> Any:
    return ApplicationError("invalid", message, fields=fields, status=status)


def clean_headers(headers: object) -> dict[str, str]:
    """The headers to store, or a 400 naming what is wrong (names are RFC 9110 tokens, values
    one line of text, nothing the transport sets itself)."""
    if not isinstance(headers, dict):
        raise _invalid({"headers": ["An object of header names to values."]})
    if len(headers) > MAX_HEADERS:
        raise _invalid({"headers": [f"At most {MAX_HEADERS} headers."]})
    errors: list[str] = []
    cleaned: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name) or len(name) > 100:
            errors.append(f"{str(name)[:100]!r} is not a header name.")
            continue
        if name.lower() in RESERVED_HEADERS:
            errors.append(f"{name!r} is set by the MCP client itself.")
            continue
        if name.lower() in {n.lower() for n in cleaned}:
            errors.append(f"{name!r} is given twice.")
            continue
        if not isinstance(value, str) or len(value) > MAX_HEADER_VALUE:
            errors.append(f"The value of {name!r} must be text of at most {MAX_HEADER_VALUE}.")
            continue
        if any(ch in value for ch in "\r\n\0") or value != value.strip():
            errors.append(f"The value of {name!r} must be one line without surrounding spaces.")
            continue
        cleaned[name] = value
    if errors:
        # Names are what OpenAPI 3.0 cannot constrain (HEADERS_SCHEMA's propertyNames is 3.1).
        raise _invalid({"headers": errors}, status=422)
    return cleaned


def url_problems(url: str) -> list[str]:
    """Why the server may not be at ``url`` (empty: it may). No user name or password in it
    (the ``web_scrape`` rule: credentials go in the headers, stored encrypted), and https
    unless every address of its host is on the allow-list (plain http would send the headers
    unencrypted). The host of a plain http URL is resolved now; the client checks again at
    every connection."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ["An http(s) URL of the server's streamable HTTP endpoint."]
    if "@" in parts.netloc:
        return ["No user name or password in the URL: put credentials in the headers."]
    if parts.scheme == "http":
        try:
            port = parts.port or 80
            check(parts.hostname, port, allowed_addresses(), system_resolver, plain_http=True)
        except ValueError:
            return ["The URL's port is not a number from 0 to 65535."]
        except AddressRefused:
            return [
                "Use an https URL: plain http is only for addresses a superuser allowed "
                "(admin: MCP allowed private addresses), since it would send the headers "
                "unencrypted."
            ]
    return []


def _validate(fields: dict[str, Any]) -> None:
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise ApplicationError("invalid", f"Unknown MCP server fields: {sorted(unknown)}.")
    errors: dict[str, list[str]] = {}
    slug = fields.get("slug")
    if slug is not None and (not re.fullmatch(SLUG_REGEX, slug) or len(slug) > SLUG_MAX_LENGTH):
        errors["slug"] = [
            "Lower-case letters and digits, single underscores between them, starting with a "
            "letter, at most 24 characters (e.g. 'weather')."
        ]
    # What a URL the schema's ``format: uri`` takes may still break (scheme, credentials, plain
    # http): rules the schema cannot state, 422, unless a field is wrong as the schema says.
    rules: dict[str, list[str]] = {}
    url = fields.get("url")
    if url is not None:
        problems = (
            url_problems(url)
            if isinstance(url, str) and re.match(r"^https?://[^/\s]+", url)
            else ["An http(s) URL of the server's streamable HTTP endpoint."]
        )
        if problems:
            rules["url"] = problems
    timeout = fields.get("timeout_seconds")
    if timeout is not None and not 1 <= timeout <= MAX_TIMEOUT_SECONDS:
        errors["timeout_seconds"] = [f"From 1 to {MAX_TIMEOUT_SECONDS} seconds."]
    if errors:
        raise _invalid({**errors, **rules})
    if rules:
        raise _invalid(rules, status=422)
