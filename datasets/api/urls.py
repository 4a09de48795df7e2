from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from datasets.api.views import AnalysisDatasetViewSet, ResultDetail, ResultDownload

router = SimpleRouter()
router.register("analysis/datasets", AnalysisDatasetViewSet, basename="analysis-dataset")

urlpatterns = [
    path("analysis/results/<str:result_id>/", ResultDetail.as_view(), name="analysis-result"),
    path(
        "analysis/results/<str:result_id>/download/",
        ResultDownload.as_view(),
        name="analysis-result-download",
    ),
    *router.urls,
]
