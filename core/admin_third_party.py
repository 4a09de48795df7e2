"""Third-party admins (auth groups, DRF tokens, Celery beat's schedules, django-axes' login
lockouts) registered on the admin theme's classes, so that every admin page looks and works alike
(unfold's documented way: unregister, then register a subclass of both the package's admin and
unfold's ``ModelAdmin``).

All of these stay superuser-only: agency members hold no Django model permissions, and an agent's
schedule is edited on the agent (``trigger_schedule``), which writes its beat entry.
"""

from __future__ import annotations

from typing import Any

from axes.admin import AccessAttemptAdmin as BaseAccessAttemptAdmin
from axes.models import AccessAttempt
from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin as BaseGroupAdmin
from django.contrib.auth.models import Group
from django.db.models import QuerySet
from django.http import HttpRequest

# Importing a package's admin module registers its admins; it must have happened before they
# are unregistered (core's admin is discovered before these apps').
from django_celery_beat import admin as beat_admin
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)
from rest_framework.authtoken import admin as token_admin
from rest_framework.authtoken.models import TokenProxy
from unfold.widgets import UnfoldAdminSelectWidget, UnfoldAdminTextInputWidget

from core.admin_scoping import ModelAdmin

for model in (
    Group,
    TokenProxy,
    PeriodicTask,
    IntervalSchedule,
    CrontabSchedule,
    SolarSchedule,
    ClockedSchedule,
):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


@admin.register(Group)
class GroupAdmin(BaseGroupAdmin, ModelAdmin):
    pass


@admin.register(TokenProxy)
class TokenAdmin(token_admin.TokenAdmin, ModelAdmin):
    pass


class TaskSelectWidget(UnfoldAdminSelectWidget, beat_admin.TaskSelectWidget):
    """Celery's registered task names, in the theme's select."""


class PeriodicTaskForm(beat_admin.PeriodicTaskForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["task"].widget = UnfoldAdminTextInputWidget()
        self.fields["regtask"].widget = TaskSelectWidget()


@admin.register(PeriodicTask)
class PeriodicTaskAdmin(beat_admin.PeriodicTaskAdmin, ModelAdmin):
    form = PeriodicTaskForm


@admin.register(IntervalSchedule)
class IntervalScheduleAdmin(ModelAdmin):
    pass


class CrontabScheduleForm(forms.ModelForm[CrontabSchedule]):
    """django-celery-beat 2.1's default for a new crontab's time zone reads an attribute that
    django-timezone-field 4 no longer has (``TimeZoneField.CHOICES``): the add page failed with
    an AttributeError. A new crontab starts in the project's time zone instead."""

    class Meta:
        model = CrontabSchedule
        fields = ("timezone",)  # the admin adds the others

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("instance") is None:
            kwargs["instance"] = CrontabSchedule(timezone=settings.CELERY_TIMEZONE)
        super().__init__(*args, **kwargs)


@admin.register(CrontabSchedule)
class CrontabScheduleAdmin(ModelAdmin):
    form = CrontabScheduleForm


@admin.register(SolarSchedule)
class SolarScheduleAdmin(ModelAdmin):
    pass


@admin.register(ClockedSchedule)
class ClockedScheduleAdmin(beat_admin.ClockedScheduleAdmin, ModelAdmin):
    pass


@admin.register(AccessAttempt)
class AccessAttemptAdmin(BaseAccessAttemptAdmin, ModelAdmin):
    """Failed logins counted per account and address (README "Login throttling"): unlocking
    deletes the counted failures of the rows chosen, and that account or address may log in."""

    actions = ["unlock", "cleanup_expired_attempts"]

    @admin.action(description="Unlock: forget these failed logins")
    def unlock(self, request: HttpRequest, queryset: QuerySet[AccessAttempt]) -> None:
        count, _ = queryset.delete()
        self.message_user(request, f"Unlocked: {count} failed-login record(s) removed.")
