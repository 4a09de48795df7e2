"""The understanding's overall confidence, seed 000's formula (README "Understanding phase"):

    confidence = entity_extraction * 0.3 + schema_mapping * 0.3 + pattern_match * 0.2
                 + no_ambiguities * 0.2

with the weights of ``settings.AGENTDESK_UNDERSTANDING_WEIGHTS`` (these by default), divided by
their sum so that the result stays between 0 and 1 whatever they add up to. Each component is
between 0 and 1: ``entity_extraction`` and ``pattern_match`` are the model's own confidence in
the entities it found and in the kind of operation asked for; ``schema_mapping`` is the mean
confidence of its entity-to-field mappings (1 with nothing to map); ``no_ambiguities`` is 1
when it found no ambiguity, else 0.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

COMPONENTS = ("entity_extraction", "schema_mapping", "pattern_match", "no_ambiguities")
SEED_WEIGHTS: dict[str, float] = {
    "entity_extraction": 0.3,
    "schema_mapping": 0.3,
    "pattern_match": 0.2,
    "no_ambiguities": 0.2,
}


def checked_weights(weights: Mapping[str, float | str]) -> dict[str, float]:
    """``weights`` as the formula takes them, or ImproperlyConfigured naming what is wrong."""
    if set(weights) != set(COMPONENTS):
        raise ImproperlyConfigured(
            "AGENTDESK_UNDERSTANDING_WEIGHTS must give exactly these weights: "
            + ", ".join(COMPONENTS)
            + f" (got: {', '.join(sorted(weights)) or 'none'})."
        )
    try:
        checked = {name: float(weights[name]) for name in COMPONENTS}
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(
            f"AGENTDESK_UNDERSTANDING_WEIGHTS: each weight is a number ({exc})."
        ) from exc
    if any(value < 0 for value in checked.values()) or sum(checked.values()) <= 0:
        raise ImproperlyConfigured(
            "AGENTDESK_UNDERSTANDING_WEIGHTS: each weight is 0 or more, and they add up to more "
            "than 0."
        )
    return checked


def weights() -> dict[str, float]:
    return checked_weights(settings.AGENTDESK_UNDERSTANDING_WEIGHTS)


def clip(value: object) -> float:
    """A component's value between 0 and 1 (anything else a model sends is 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return min(1.0, max(0.0, float(value)))


def overall(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """The weighted mean of the components, rounded to 2 places as the seed stores it."""
    total = sum(weights[name] for name in COMPONENTS)
    value = sum(weights[name] * clip(scores.get(name, 0.0)) for name in COMPONENTS) / total
    return round(value, 2)
