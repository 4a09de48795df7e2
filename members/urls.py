"""``/invitations/``: the pages an invitee reaches from the e-mail (no login needed)."""

from django.urls import path

from members import views

app_name = "members"

urlpatterns = [
    path("<str:token>/", views.accept, name="accept"),
]
