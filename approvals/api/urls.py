from __future__ import annotations

from rest_framework.routers import SimpleRouter

from approvals.api.risk_rules import RiskRuleViewSet
from approvals.api.views import ApprovalViewSet, QuestionViewSet

router = SimpleRouter()
router.register("approvals", ApprovalViewSet, basename="approval")
router.register("questions", QuestionViewSet, basename="question")
router.register("risk-rules", RiskRuleViewSet, basename="risk-rule")

urlpatterns = router.urls
