"""django-celery-beat's database scheduler with a zoneinfo fix.

django-celery-beat 2.9 requires Django < 6.1, so Django 6.1 resolves to 2.1.0, whose
``ModelEntry._default_now`` calls pytz's ``localize`` on Celery's zoneinfo timezone and fails
(celery/django-celery-beat#871). ``app.now()`` is already aware; that is all the entry needs.
"""

from __future__ import annotations

import datetime

from django_celery_beat import schedulers


class ModelEntry(schedulers.ModelEntry):
    def _default_now(self) -> datetime.datetime:
        now: datetime.datetime = self.app.now()
        return now


class DatabaseScheduler(schedulers.DatabaseScheduler):
    Entry = ModelEntry
