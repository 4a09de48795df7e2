from django.urls import path

from sso import views

app_name = "sso"

urlpatterns = [
    path("", views.find, name="find"),
    path("callback/", views.SsoCallbackView.as_view(), name="callback"),
    path("<slug:slug>/", views.entry, name="entry"),
    path("<slug:slug>/login/", views.SsoLoginView.as_view(), name="login"),
]
