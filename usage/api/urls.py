from __future__ import annotations

from django.urls import path

from usage.api.views import UsageSummaryView

urlpatterns = [path("usage/summary/", UsageSummaryView.as_view(), name="usage-summary")]
