from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from usage.api.budgets import BudgetViewSet, UsagePeriodViewSet
from usage.api.daily import UsageDailyList
from usage.api.prices import ModelPriceViewSet
from usage.api.views import UsageSummaryView

router = SimpleRouter()
router.register("model-prices", ModelPriceViewSet, basename="model-price")
router.register("budgets", BudgetViewSet, basename="budget")
router.register("usage/periods", UsagePeriodViewSet, basename="usage-period")

urlpatterns = [
    path("usage/summary/", UsageSummaryView.as_view(), name="usage-summary"),
    path("usage/daily/", UsageDailyList.as_view(), name="usage-daily"),
    *router.urls,
]
