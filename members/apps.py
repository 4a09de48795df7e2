from django.apps import AppConfig


class MembersConfig(AppConfig):
    name = "members"
    verbose_name = "Members"
    default_auto_field = "django.db.models.BigAutoField"
