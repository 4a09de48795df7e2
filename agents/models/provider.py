"""LLM provider configurations with API keys encrypted at rest (seed 004 ``ai_llm_providers``)."""

from __future__ import annotations

from django.db import models

from agents.models.agent_choices import ProviderName
from core import crypto
from core.models import AgencyOwnedModel, Site


class LLMProvider(AgencyOwnedModel):
    """An agency's credentials and limits for one provider, for all its sites or one site.

    The API key is stored only as a Fernet token (:mod:`core.crypto`): write it with
    :meth:`set_api_key`, read it with :meth:`get_api_key` at the gateway boundary, and show
    :attr:`has_api_key` / ``api_key_hint`` anywhere else. ``str()`` and ``repr()`` never include it.
    """

    # NULL: the agency-wide default for every site (the seed's NULL site meant "platform default").
    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    provider_name = models.CharField(max_length=32, choices=ProviderName.choices)
    is_active = models.BooleanField("active", default=True)
    is_default = models.BooleanField("default", default=False)

    api_key_encrypted = crypto.EncryptedTextField(blank=True, editable=False)
    # The last four characters, so that staff can tell keys apart without seeing them.
    api_key_hint = models.CharField(max_length=8, blank=True, editable=False)
    api_endpoint = models.URLField(max_length=500, blank=True)  # base URL; required for local
    organization_id = models.CharField(max_length=200, blank=True)

    available_models = models.JSONField(default=list, blank=True)
    default_model = models.CharField(max_length=100, blank=True)

    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["provider_name", "created_at"]
        verbose_name = "LLM provider"
        constraints = [
            models.UniqueConstraint(
                fields=["agency", "site", "provider_name"],
                nulls_distinct=False,
                name="agents_llmprovider_unique_per_site",
            ),
            # At most one default provider per agency and site.
            models.UniqueConstraint(
                fields=["agency", "site"],
                condition=models.Q(is_default=True),
                nulls_distinct=False,
                name="agents_llmprovider_one_default",
            ),
            models.CheckConstraint(
                condition=models.Q(provider_name__in=ProviderName.values),
                name="agents_llmprovider_provider_name_valid",
            ),
        ]

    def __str__(self) -> str:
        scope = "all sites" if self.site_id is None else f"site {self.site_id}"
        return f"{self.get_provider_name_display()} ({scope})"

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    def set_api_key(self, api_key: str) -> None:
        """Encrypt ``api_key`` into the instance (``""`` clears it); the caller saves."""
        api_key = api_key.strip()
        self.api_key_encrypted = crypto.encrypt(api_key) if api_key else ""
        self.api_key_hint = api_key[-4:] if len(api_key) >= 12 else ""

    def get_api_key(self) -> str | None:
        """The plaintext key, or None when none is stored. Only the LLM gateway should call this."""
        return crypto.decrypt(self.api_key_encrypted) if self.api_key_encrypted else None
