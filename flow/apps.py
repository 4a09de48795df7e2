from django.apps import AppConfig

from approvals import question_types


class FlowConfig(AppConfig):
    name = "flow"
    verbose_name = "Flow analysis"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The loop question's answers: approvals.questions asks flow through its registry.
        from flow import loops  # noqa: PLC0415 - AppConfig.ready: loops imports the models

        question_types.register(
            loops.LOOP_QUESTION_TYPE,
            question_types.QuestionType(
                resumed=loops.question_resumed, stopped=loops.question_stopped
            ),
        )
