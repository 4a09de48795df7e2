from django.contrib import admin
from django.urls import include, path

from core.views import healthz
from live.views import site_root

urlpatterns = [
    path("", site_root, name="site-root"),  # "View site": the staff home (the admin index)
    path("healthz", healthz, name="healthz"),
    path("live/", include("live.urls")),
    path("admin/", admin.site.urls),
    path("api/", include("config.api_urls")),
]
