from __future__ import annotations

from rest_framework.routers import SimpleRouter

from tools.api.views import ToolViewSet

router = SimpleRouter()
router.register("tools", ToolViewSet, basename="tool")

urlpatterns = router.urls
