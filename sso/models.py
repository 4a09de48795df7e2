"""An agency's OpenID Connect provider, and which of its subjects is which user."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import RegexValidator
from django.db import models

from core import crypto
from core.models import AgencyOwnedModel, Role

# A bare e-mail domain, lower case: "example.com", "mail.example.co.uk".
DOMAIN_REGEX = r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$"


class SsoProvider(AgencyOwnedModel):
    """One agency's OpenID Connect provider (at most one per agency).

    Its staff sign in at ``/sso/<slug>/``. A login is accepted only for a verified e-mail address
    in ``allowed_domains``; a first login creates the user and a membership with
    ``new_member_role`` (just in time); an existing user is let in only when they already belong
    to this agency (sso.services).
    """

    slug = models.SlugField(
        "sign-in name",
        max_length=100,
        unique=True,
        help_text="Staff sign in at /sso/<sign-in name>/ (for example your agency's short name).",
    )
    display_name = models.CharField(
        max_length=100, help_text='The button says "Sign in with <display name>".'
    )
    issuer = models.URLField(
        max_length=500,
        help_text="The provider's issuer URL, exactly as its /.well-known/openid-configuration "
        "names it (for example https://login.example.com/realms/agency).",
    )
    client_id = models.CharField("client ID", max_length=255)
    # Fernet token (core/crypto.py); write-only in the admin, never shown again.
    client_secret_encrypted = crypto.EncryptedTextField(blank=True, editable=False)
    allowed_domains = ArrayField(
        models.CharField(
            max_length=253,
            validators=[RegexValidator(DOMAIN_REGEX, "A domain is lower case, like example.com.")],
        ),
        help_text="E-mail domains this provider may sign in, comma-separated (example.com). "
        "Any other address is refused.",
    )
    new_member_role = models.CharField(
        max_length=16,
        choices=Role.choices,
        default=Role.VIEWER,
        help_text="The role of a user created at their first sign-in.",
    )
    is_enabled = models.BooleanField("enabled", default=False)
    password_login_allowed = models.BooleanField(
        default=True,
        help_text="Members may also log in with a password. Off: members sign in through this "
        "provider only (superusers always keep their password login).",
    )

    class Meta:
        verbose_name = "single sign-on provider"
        constraints = [
            models.UniqueConstraint(fields=["agency"], name="sso_provider_one_per_agency"),
            models.CheckConstraint(
                condition=models.Q(new_member_role__in=Role.values),
                name="sso_provider_role_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name

    @property
    def has_client_secret(self) -> bool:
        return bool(self.client_secret_encrypted)

    def set_client_secret(self, secret: str) -> None:
        """Encrypt ``secret`` into the instance (``""`` clears it); the caller saves."""
        secret = secret.strip()
        self.client_secret_encrypted = crypto.encrypt(secret) if secret else ""

    def get_client_secret(self) -> str:
        """The plaintext secret (``""`` for a public client). Only the token request reads it."""
        return crypto.decrypt(self.client_secret_encrypted) if self.client_secret_encrypted else ""


class SsoIdentity(AgencyOwnedModel):
    """The provider's subject (``sub``) that signed a user in: later sign-ins match on it."""

    provider = models.ForeignKey(SsoProvider, on_delete=models.CASCADE, related_name="identities")
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities"
    )
    last_login_at = models.DateTimeField()

    class Meta:
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"
        constraints = [
            models.UniqueConstraint(fields=["provider", "subject"], name="sso_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} -> {self.user}"
