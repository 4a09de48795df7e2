"""The staff home's fragments (the home itself is the admin index: live.views)."""

from django.contrib import admin
from django.urls import path

from live import views

app_name = "live"

urlpatterns = [
    # Behind the admin's login like the page: staff only, never cached.
    path("home/<slug:name>/", admin.site.admin_view(views.home_panel), name="home-panel"),
    path("waiting-count/", admin.site.admin_view(views.waiting_count), name="waiting-count"),
]
