from __future__ import annotations

from rest_framework.routers import SimpleRouter

from approvals.api.views import ApprovalViewSet, QuestionViewSet

router = SimpleRouter()
router.register("approvals", ApprovalViewSet, basename="approval")
router.register("questions", QuestionViewSet, basename="question")

urlpatterns = router.urls
