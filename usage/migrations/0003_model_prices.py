"""Platform list prices (USD per million tokens) of the models the templates and demo use.

Starting values from the providers' public price lists; they are ordinary rows, editable in the
admin (superusers) when a provider changes its prices, and an agency row for the same provider
and model overrides them. Cache prices: OpenAI bills cached input reads; Anthropic bills cache
reads and 5-minute cache writes. Dated model ids (``claude-3-5-sonnet-20241022``) are listed as
the seed's default Anthropic model uses one.
"""

from decimal import Decimal

from django.db import migrations

from core.tenancy import platform_context

PRICES = [
    # provider, model, input, output, cache read, cache write
    ("openai", "gpt-4o", "2.50", "10.00", "1.25", None),
    ("openai", "gpt-4o-mini", "0.15", "0.60", "0.075", None),
    ("openai", "text-embedding-3-small", "0.02", "0", None, None),
    ("anthropic", "claude-sonnet-4-5", "3.00", "15.00", "0.30", "3.75"),
    ("anthropic", "claude-3-5-sonnet-20241022", "3.00", "15.00", "0.30", "3.75"),
    ("anthropic", "claude-haiku-4-5", "1.00", "5.00", "0.10", "1.25"),
    ("anthropic", "claude-3-5-haiku-20241022", "0.80", "4.00", "0.08", "1.00"),
]


def _decimal(value):
    return None if value is None else Decimal(value)


def seed_prices(apps, schema_editor):
    ModelPrice = apps.get_model("usage", "ModelPrice")
    alias = schema_editor.connection.alias
    # Migrations run as the owner role, which FORCE row-level security also restricts.
    with platform_context(using=alias):
        for provider, model, input_, output, cache_read, cache_write in PRICES:
            ModelPrice.objects.using(alias).update_or_create(
                agency=None,
                provider=provider,
                model=model,
                defaults={
                    "input_per_mtok": Decimal(input_),
                    "output_per_mtok": Decimal(output),
                    "cache_read_per_mtok": _decimal(cache_read),
                    "cache_write_per_mtok": _decimal(cache_write),
                },
            )


def remove_prices(apps, schema_editor):
    ModelPrice = apps.get_model("usage", "ModelPrice")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        for provider, model, *_ in PRICES:
            ModelPrice.objects.using(alias).filter(
                agency=None, provider=provider, model=model
            ).delete()


class Migration(migrations.Migration):
    dependencies = [("usage", "0002_row_level_security")]

    operations = [migrations.RunPython(seed_prices, remove_prices)]
