from django.contrib.auth.views import LoginView
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
