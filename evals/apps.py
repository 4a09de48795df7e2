from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evaluations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The apps are loaded: the deploy gate holds an agent's new versions
        # (agents.services.versions).
        from agents.services.versions import VERSION_GATES  # noqa: PLC0415
        from evals.services.gate import DeployGateHold  # noqa: PLC0415

        if not any(isinstance(gate, DeployGateHold) for gate in VERSION_GATES):
            VERSION_GATES.append(DeployGateHold())
