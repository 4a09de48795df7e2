from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from evals.api.views import DatasetViewSet, ExperimentViewSet, SaveAsTestCase

router = SimpleRouter()
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("experiments", ExperimentViewSet, basename="experiment")

urlpatterns = [
    path(
        "executions/<str:execution_id>/test-case/",
        SaveAsTestCase.as_view(),
        name="execution-test-case",
    ),
    *router.urls,
]
