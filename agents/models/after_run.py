"""The work owed to a run once it has ended, recorded with its end (agents/after_run.py)."""

from __future__ import annotations

from django.db import models

from agents.models.execution import Execution
from core.models import AgencyOwnedModel


class AfterRunWork(AgencyOwnedModel):
    """One after-run task (by its Celery name) a run that ended is owed: written in the
    transaction that ends the run, sent once that commits, deleted by the task once it has done
    its work. A row still here at ``due_at`` lost its message (a broker outage, a worker lost
    with it) or its task failed: beat's reaper sends it again and moves ``due_at`` on."""

    # No index of its own: the unique constraint below leads with it.
    execution = models.ForeignKey(
        Execution, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    task = models.CharField(max_length=100)
    due_at = models.DateTimeField()
    sends = models.PositiveSmallIntegerField(default=1)  # messages sent so far

    class Meta:
        verbose_name = "after-run work"
        verbose_name_plural = "after-run work"
        constraints = [
            models.UniqueConstraint(fields=["execution", "task"], name="agents_afterrun_unique"),
        ]
        indexes = [models.Index(fields=["due_at"], name="agents_afterrun_due_idx")]

    def __str__(self) -> str:
        return f"{self.task} of {self.execution_id}"
