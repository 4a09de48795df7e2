"""API keys may expire; the answers to requests sent with an Idempotency-Key
(core/api/idempotency.py), agency-owned under row-level security."""

import django.db.models.deletion
import uuid
from django.db import migrations, models

from core.rls import enable_rls


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0010_agency_embedding_model'),
    ]

    operations = [
        migrations.AddField(
            model_name='apikey',
            name='expires_at',
            field=models.DateTimeField(blank=True, help_text='Refused from this moment on, like a revoked key. Empty: never expires.', null=True),
        ),
        migrations.AlterField(
            model_name='apikey',
            name='last_used_at',
            field=models.DateTimeField(blank=True, help_text='Updated at most once a minute.', null=True),
        ),
        migrations.CreateModel(
            name='IdempotencyRecord',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('credential', models.CharField(max_length=64)),
                ('key', models.CharField(max_length=255)),
                ('request_hash', models.CharField(max_length=64)),
                ('response_status', models.PositiveSmallIntegerField()),
                ('response_body', models.TextField()),
                ('expires_at', models.DateTimeField()),
                ('agency', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='core.agency')),
            ],
            options={
                'indexes': [models.Index(fields=['expires_at'], name='core_idempotency_expires')],
                'constraints': [models.UniqueConstraint(fields=('agency', 'credential', 'key'), name='core_idempotency_unique_key')],
            },
        ),
        enable_rls("core_idempotencyrecord"),
    ]
