"""The core app's models: tenancy (agencies, sites, memberships, users, the event log), API keys
and idempotency records, one module each, re-exported here."""

from core.models.api_keys import ApiKey
from core.models.idempotency import IdempotencyRecord
from core.models.tenancy import (
    BUILTIN_MODULES,
    EVENT_TYPE_REGEX,
    MODULE_NAME_REGEX,
    ActorType,
    Agency,
    AgencyOwnedModel,
    EmbeddingProvider,
    Event,
    Membership,
    Role,
    Site,
    User,
    default_enabled_modules,
)

__all__ = [
    "BUILTIN_MODULES",
    "EVENT_TYPE_REGEX",
    "MODULE_NAME_REGEX",
    "ActorType",
    "Agency",
    "AgencyOwnedModel",
    "ApiKey",
    "EmbeddingProvider",
    "Event",
    "IdempotencyRecord",
    "Membership",
    "Role",
    "Site",
    "User",
    "default_enabled_modules",
]
