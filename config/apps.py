"""App configurations the project overrides for third-party apps."""

from __future__ import annotations

from django_celery_beat.apps import BeatConfig


class CeleryBeatConfig(BeatConfig):
    """django-celery-beat's migrations create integer ids and its app sets no
    ``default_auto_field``, so with the project's BigAutoField default Django sees a model change
    no migration covers (``migrate`` warned of it on every start). Its tables keep their ids."""

    default_auto_field = "django.db.models.AutoField"
