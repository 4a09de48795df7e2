from django.urls import path

from ops import views

urlpatterns = [
    # Also answered ahead of the middleware that needs the database (ops.middleware).
    path("metrics", views.metrics, name="metrics"),
]
