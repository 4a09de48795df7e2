"""The daily evaluation budget (the LLM judge's spending, apart from the runs'), with RLS."""

import uuid
from decimal import Decimal

import django.db.models.deletion
import django.db.models.expressions
from django.db import migrations, models

import usage.models
from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0012_labels_2"),
        ("usage", "0010_enums_valid"),
    ]

    operations = [
        migrations.CreateModel(
            name="EvaluationBudget",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("date", models.DateField(default=usage.models.today)),
                (
                    "limit_usd",
                    models.DecimalField(
                        decimal_places=4, default=usage.models._evaluation_limit, max_digits=12
                    ),
                ),
                (
                    "used_usd",
                    models.DecimalField(decimal_places=6, default=Decimal("0"), max_digits=12),
                ),
                (
                    "reserved_usd",
                    models.DecimalField(decimal_places=6, default=Decimal("0"), max_digits=12),
                ),
                (
                    "agency",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="core.agency",
                    ),
                ),
            ],
            options={
                "ordering": ["-date"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("agency", "date"), name="usage_evaluationbudget_unique_day"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("limit_usd__gte", 0), ("reserved_usd__gte", 0), ("used_usd__gte", 0)
                        ),
                        name="usage_evaluationbudget_non_negative",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            (
                                "used_usd__lte",
                                django.db.models.expressions.CombinedExpression(
                                    models.F("limit_usd"), "-", models.F("reserved_usd")
                                ),
                            )
                        ),
                        name="usage_evaluationbudget_within_limit",
                    ),
                ],
            },
        ),
        enable_rls("usage_evaluationbudget"),
    ]
