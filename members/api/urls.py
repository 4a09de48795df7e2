from __future__ import annotations

from rest_framework.routers import SimpleRouter

from members.api.views import InvitationViewSet, MemberViewSet

router = SimpleRouter()
router.register("members", MemberViewSet, basename="member")
router.register("invitations", InvitationViewSet, basename="invitation")

urlpatterns = router.urls
