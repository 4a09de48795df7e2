"""Agent memory settings (issue 17): the recall and history token budgets, the extraction switch,
the conversation window and its lifetime; when an agent's memories were last consolidated."""

import agents.models.agent
import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0019_retention_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='agent',
            name='context_token_budget',
            field=models.PositiveIntegerField(default=32000, help_text="Tokens of a run's history sent with each model call. Past it, the oldest steps are summarised by the model (one more model call, counted in usage) and the summary is sent with the instruction instead; a tool call always stays with its result. 0: no limit (the whole history every call); else at least 1000.", validators=[agents.models.agent.validate_context_token_budget, django.core.validators.MaxValueValidator(1000000)]),
        ),
        migrations.AddField(
            model_name='agent',
            name='conversation_ttl_hours',
            field=models.PositiveIntegerField(default=24, help_text='A conversation nobody continued for this long is forgotten.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(8760)]),
        ),
        migrations.AddField(
            model_name='agent',
            name='conversation_window',
            field=models.PositiveSmallIntegerField(default=12, help_text='Messages of the recent conversation with the same contact, user or session that a run starts with (each run adds its instruction and answer). 0: none.', validators=[django.core.validators.MaxValueValidator(200)]),
        ),
        migrations.AddField(
            model_name='agent',
            name='memory_consolidated_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='agent',
            name='memory_extraction_enabled',
            field=models.BooleanField(default=True, help_text="After each run, the model extracts facts, preferences, patterns and outcomes worth remembering (one more model call per run, counted in usage and budget); a memory nearly identical to one it has raises that one's confidence."),
        ),
        migrations.AddField(
            model_name='agent',
            name='memory_token_budget',
            field=models.PositiveIntegerField(default=800, help_text="Tokens of the system prompt given to what the agent remembers when a run starts: its memories most relevant to the run's instruction or event, and its most similar past runs. 0: none.", validators=[django.core.validators.MaxValueValidator(1000000)]),
        ),
        migrations.AddField(
            model_name='agenttemplate',
            name='context_token_budget',
            field=models.PositiveIntegerField(default=32000, help_text="Tokens of a run's history sent with each model call. Past it, the oldest steps are summarised by the model (one more model call, counted in usage) and the summary is sent with the instruction instead; a tool call always stays with its result. 0: no limit (the whole history every call); else at least 1000.", validators=[agents.models.agent.validate_context_token_budget, django.core.validators.MaxValueValidator(1000000)]),
        ),
        migrations.AddField(
            model_name='agenttemplate',
            name='conversation_ttl_hours',
            field=models.PositiveIntegerField(default=24, help_text='A conversation nobody continued for this long is forgotten.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(8760)]),
        ),
        migrations.AddField(
            model_name='agenttemplate',
            name='conversation_window',
            field=models.PositiveSmallIntegerField(default=12, help_text='Messages of the recent conversation with the same contact, user or session that a run starts with (each run adds its instruction and answer). 0: none.', validators=[django.core.validators.MaxValueValidator(200)]),
        ),
        migrations.AddField(
            model_name='agenttemplate',
            name='memory_extraction_enabled',
            field=models.BooleanField(default=True, help_text="After each run, the model extracts facts, preferences, patterns and outcomes worth remembering (one more model call per run, counted in usage and budget); a memory nearly identical to one it has raises that one's confidence."),
        ),
        migrations.AddField(
            model_name='agenttemplate',
            name='memory_token_budget',
            field=models.PositiveIntegerField(default=800, help_text="Tokens of the system prompt given to what the agent remembers when a run starts: its memories most relevant to the run's instruction or event, and its most similar past runs. 0: none.", validators=[django.core.validators.MaxValueValidator(1000000)]),
        ),
        migrations.AddConstraint(
            model_name='agent',
            constraint=models.CheckConstraint(condition=models.Q(('conversation_ttl_hours__gt', 0)), name='agents_agent_conversation_ttl_positive'),
        ),
        migrations.AddConstraint(
            model_name='agent',
            constraint=models.CheckConstraint(condition=models.Q(('context_token_budget', 0), ('context_token_budget__gte', 1000), _connector='OR'), name='agents_agent_context_budget_range'),
        ),
        migrations.AddConstraint(
            model_name='agenttemplate',
            constraint=models.CheckConstraint(condition=models.Q(('conversation_ttl_hours__gt', 0)), name='agents_agenttemplate_conversation_ttl_positive'),
        ),
        migrations.AddConstraint(
            model_name='agenttemplate',
            constraint=models.CheckConstraint(condition=models.Q(('context_token_budget', 0), ('context_token_budget__gte', 1000), _connector='OR'), name='agents_agenttemplate_context_budget_range'),
        ),
    ]
