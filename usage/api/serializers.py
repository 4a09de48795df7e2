from __future__ import annotations

import datetime
from typing import Any

from rest_framework import serializers

from core.api.exceptions import RULE
from usage.models import today

MAX_RANGE_DAYS = 366
DEFAULT_RANGE_DAYS = 30


class UsageQuerySerializer(serializers.Serializer):
    """Query parameters (other parameters are ignored, as on every list)."""

    date_from = serializers.DateField(required=False, help_text="Default: 30 days before date_to.")
    date_to = serializers.DateField(required=False, help_text="Inclusive. Default: today.")
    agent = serializers.UUIDField(required=False)
    site = serializers.UUIDField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        date_to = attrs.get("date_to") or today()
        date_from = attrs.get("date_from")
        if date_from is None:
            try:
                date_from = date_to - datetime.timedelta(days=DEFAULT_RANGE_DAYS - 1)
            except OverflowError:
                date_from = datetime.date.min
        if date_from > date_to:
            raise serializers.ValidationError(
                {"date_from": ["Must not be after date_to."]}, code=RULE
            )
        if (date_to - date_from).days >= MAX_RANGE_DAYS:
            raise serializers.ValidationError(
                {"date_from": [f"The range may span at most {MAX_RANGE_DAYS} days."]}, code=RULE
            )
        return {**attrs, "date_from": date_from, "date_to": date_to}


def _money() -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=20, decimal_places=6)


class UsageTotalsSerializer(serializers.Serializer):
    agent_runs = serializers.IntegerField()
    llm_calls = serializers.IntegerField()
    tool_calls = serializers.IntegerField()
    tokens_input = serializers.IntegerField()
    tokens_output = serializers.IntegerField()
    tokens_cache_read = serializers.IntegerField()
    tokens_cache_write = serializers.IntegerField()
    cost_usd = _money()


class UsageDaySerializer(UsageTotalsSerializer):
    date = serializers.DateField()


class UsageAgentSerializer(UsageTotalsSerializer):
    agent_id = serializers.UUIDField(allow_null=True)
    agent_name = serializers.CharField(allow_null=True)


class UsageModelSerializer(UsageTotalsSerializer):
    provider = serializers.CharField()
    model = serializers.CharField()


class UsageSummarySerializer(serializers.Serializer):
    date_from = serializers.DateField()
    date_to = serializers.DateField()
    totals = UsageTotalsSerializer()
    by_day = UsageDaySerializer(many=True)
    by_agent = UsageAgentSerializer(many=True)
    by_model = UsageModelSerializer(many=True)
