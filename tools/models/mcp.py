"""MCP servers an agency registered, and the non-public addresses a superuser let them be at.

Part of :mod:`tools.models` (the ``tools`` app and its migrations); :mod:`tools.mcp.models`
re-exports them for the MCP modules.
"""

from __future__ import annotations

import json
from ipaddress import ip_network

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from core import crypto
from core.models import AgencyOwnedModel

# The prefix of a server's tools: ``mcp_<slug>__<tool>`` (tools/mcp/naming.py). No double
# underscore inside, so ``__`` always marks where the server's part ends.
SLUG_REGEX = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
SLUG_MAX_LENGTH = 24
DEFAULT_TIMEOUT_SECONDS = 30
MAX_TIMEOUT_SECONDS = 120


class McpServer(AgencyOwnedModel):
    """An MCP server (streamable HTTP transport) whose tools an agency's agents may call.

    Its tools are discovered with the MCP SDK and stored as :class:`tools.models.Tool` rows
    (``Tool.mcp_server``) named ``mcp_<slug>__<tool>``, so they go through the same registry,
    patterns, validation, limits, risk rules, approvals and ``ToolCall`` records as built-in tools.

    The HTTP headers sent to it (an ``Authorization`` token, say) are stored only as a Fernet
    token (:mod:`core.crypto`) of their JSON: write them with :meth:`set_headers`, read them with
    :meth:`get_headers` when connecting; ``header_names`` is what may be shown.
    """

    name = models.CharField(max_length=200)
    # Unique on the platform (tool names are: tools.models.Tool).
    slug = models.CharField(
        max_length=SLUG_MAX_LENGTH,
        unique=True,
        validators=[
            RegexValidator(
                SLUG_REGEX,
                "Lower-case letters and digits, single underscores between them, starting with "
                "a letter (e.g. 'weather' or 'crm_v2').",
            )
        ],
        verbose_name="prefix",
        help_text="Its tools are named mcp_[prefix]__[tool]. Unique on the platform.",
    )
    url = models.URLField(
        "URL", max_length=500, help_text="Its streamable HTTP endpoint, e.g. https://host/mcp."
    )
    headers_encrypted = crypto.EncryptedTextField(blank=True, editable=False)
    header_names = ArrayField(
        models.CharField(max_length=100), default=list, blank=True, editable=False
    )
    is_enabled = models.BooleanField("enabled", default=True)
    timeout_seconds = models.PositiveIntegerField(
        "timeout (seconds)",
        default=DEFAULT_TIMEOUT_SECONDS,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_TIMEOUT_SECONDS)],
        help_text="The longest a tool call or a discovery may take, in all.",
    )
    # Copied to each of its tools at every refresh.
    require_approval = models.BooleanField(
        default=False, help_text="Every call of its tools waits for a human approval."
    )
    rate_limit_per_minute = models.PositiveIntegerField(null=True, blank=True)
    rate_limit_per_hour = models.PositiveIntegerField(null=True, blank=True)

    last_refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)  # the last refresh's problems

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(slug__regex=SLUG_REGEX), name="tools_mcpserver_slug_format"
            ),
            models.CheckConstraint(
                condition=models.Q(timeout_seconds__gte=1, timeout_seconds__lte=120),
                name="tools_mcpserver_timeout_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (mcp_{self.slug}__*)"

    @property
    def has_headers(self) -> bool:
        return bool(self.headers_encrypted)

    def set_headers(self, headers: dict[str, str]) -> None:
        """Encrypt ``headers`` into the instance (``{}`` clears them); the caller saves."""
        self.headers_encrypted = crypto.encrypt(json.dumps(headers)) if headers else ""
        self.header_names = sorted(headers)

    def get_headers(self) -> dict[str, str]:
        """The plaintext headers. Only the MCP client should call this."""
        if not self.headers_encrypted:
            return {}
        value = json.loads(crypto.decrypt(self.headers_encrypted))
        return {str(k): str(v) for k, v in value.items()}


def validate_network(value: str) -> None:
    try:
        ip_network(value.strip(), strict=False)
    except ValueError as exc:
        raise ValidationError(f"Not an IP address or network (CIDR): {exc}.") from None


class McpAllowedAddress(models.Model):
    """A non-public address (or network) MCP servers may be at, allowed by a superuser.

    Platform configuration, not an agency's: only superusers see and change it (admin). Any
    agency's MCP server may then be at that address (on that port only, when one is given).
    Cloud metadata addresses stay refused whatever is listed (tools.net.addresses).
    """

    network = models.CharField(
        max_length=64,
        validators=[validate_network],
        help_text="An IP address (127.0.0.1) or network (10.0.5.0/24).",
    )
    port = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(65535)],
        help_text="Only this port; empty: any port.",
    )
    note = models.CharField(max_length=200, blank=True, help_text="Why it is allowed.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["network", "port"]
        verbose_name = "MCP allowed private address"
        verbose_name_plural = "MCP allowed private addresses"

    def __str__(self) -> str:
        return f"{self.network}:{self.port}" if self.port else self.network
