from __future__ import annotations

from rest_framework.routers import SimpleRouter

from core.api.views import ApiKeyViewSet, EventViewSet

router = SimpleRouter()
router.register("events", EventViewSet, basename="event")
router.register("api-keys", ApiKeyViewSet, basename="api-key")

urlpatterns = router.urls
