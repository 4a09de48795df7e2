"""Platform list prices (USD per million tokens) of Google's Gemini models, beside the OpenAI and
Anthropic ones of 0003: the Gemini API's standard paid tier.

Cache reads are Gemini's cached-content tokens (a context cache, or implicit caching), billed at
a tenth of the input price; Gemini reports no cache writes (a cache's storage is billed by the
hour, outside any call). Thinking tokens are billed as output, and the gateway counts them so.
Gemini 2.5 Pro's prices double (input) and rise by half (output) for prompts over 200k tokens:
one row holds one price, so the row has the lower tier's; an agency with such prompts can add its
own row (an agency's row for the same model overrides this one). Editable in the admin like the
others.
"""

from decimal import Decimal

from django.db import migrations

from core.tenancy import platform_context

PRICES = [
    # provider, model, input, output, cache read
    ("google", "gemini-2.5-pro", "1.25", "10.00", "0.125"),
    ("google", "gemini-2.5-flash", "0.30", "2.50", "0.03"),
    ("google", "gemini-2.5-flash-lite", "0.10", "0.40", "0.01"),
    ("google", "gemini-2.0-flash", "0.10", "0.40", "0.025"),
]


def seed_prices(apps, schema_editor):
    ModelPrice = apps.get_model("usage", "ModelPrice")
    alias = schema_editor.connection.alias
    # Migrations run as the owner role, which FORCE row-level security also restricts.
    with platform_context(using=alias):
        for provider, model, input_, output, cache_read in PRICES:
            ModelPrice.objects.using(alias).update_or_create(
                agency=None,
                provider=provider,
                model=model,
                defaults={
                    "input_per_mtok": Decimal(input_),
                    "output_per_mtok": Decimal(output),
                    "cache_read_per_mtok": Decimal(cache_read),
                    "cache_write_per_mtok": None,
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
    dependencies = [("usage", "0004_google_provider_prices")]

    operations = [migrations.RunPython(seed_prices, remove_prices)]
