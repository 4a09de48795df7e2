"""Runs started by other runs' events: ``Execution.depth`` (its parent is the existing
``parent``), and the trigger log's ``chain_too_deep`` skip reason.

The skip reasons' CHECK constraint is replaced without scanning the trigger log under this
migration's locks: the new one is added NOT VALID here (existing rows are not checked, new ones
are), and migration 0014 validates it in a transaction of its own, which lets trigger logs be
written meanwhile. The state operations are what Django would have written.
"""

from django.db import migrations, models

CONSTRAINT = "agents_triggerlog_skip_reason_valid"
REASONS = [
    "agent_inactive", "conditions_not_met", "rate_limited", "budget_exceeded", "quota_exceeded",
    "already_running", "duplicate", "chain_too_deep", "error",
]  # fmt: skip
OLD_REASONS = [reason for reason in REASONS if reason != "chain_too_deep"]


def _check(reasons: list[str]) -> str:
    listed = ", ".join(f"'{reason}'" for reason in reasons)  # constants of this migration
    return (
        f"ALTER TABLE agents_triggerlog ADD CONSTRAINT {CONSTRAINT} CHECK ("
        "(outcome = 'invoked' AND skip_reason = '')"
        f" OR (outcome = 'skipped' AND skip_reason IN ({listed})))"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0011_triggerlog_schedule_tick_unique"),
        ("core", "0007_run_chain"),
    ]

    operations = [
        migrations.AddField(
            model_name="execution",
            name="depth",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="triggerlog",
            name="skip_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("agent_inactive", "Agent inactive"),
                    ("conditions_not_met", "Trigger conditions not met"),
                    ("rate_limited", "max_runs_per_hour / max_runs_per_day reached"),
                    ("budget_exceeded", "Daily budget exceeded"),
                    ("quota_exceeded", "Period quota exceeded"),
                    ("already_running", "A run for the same trigger is under way"),
                    ("duplicate", "Trigger already handled"),
                    ("chain_too_deep", "Too many agent runs in a row started each other"),
                    ("error", "Error while evaluating the trigger"),
                ],
                max_length=32,
            ),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    [
                        f"ALTER TABLE agents_triggerlog DROP CONSTRAINT {CONSTRAINT}",
                        _check(REASONS) + " NOT VALID",
                    ],
                    [
                        f"ALTER TABLE agents_triggerlog DROP CONSTRAINT {CONSTRAINT}",
                        _check(OLD_REASONS) + " NOT VALID",
                    ],
                )
            ],
            state_operations=[
                migrations.RemoveConstraint(model_name="triggerlog", name=CONSTRAINT),
                migrations.AddConstraint(
                    model_name="triggerlog",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("outcome", "invoked"), ("skip_reason", "")),
                            models.Q(("outcome", "skipped"), ("skip_reason__in", REASONS)),
                            _connector="OR",
                        ),
                        name=CONSTRAINT,
                    ),
                ),
            ],
        ),
    ]
