from django.contrib import admin
from django.urls import include, path

from approvals.inbox.views import admin_index
from core.views import favicon, healthz, livez
from live.views import site_root

# Django's error pages in the admin's look (core/error_pages.py); its debug pages only with
# DJANGO_DEBUG set.
handler400 = "core.error_pages.bad_request"
handler403 = "core.error_pages.permission_denied"
handler404 = "core.error_pages.page_not_found"
handler500 = "core.error_pages.server_error"

# The apps' admin modules, registered here rather than at start-up (SimpleAdminConfig,
# config/settings/base.py): only a process that serves pages needs them.
admin.autodiscover()

urlpatterns = [
    path("", site_root, name="site-root"),  # "View site": the staff home (the admin index)
    path("healthz", healthz, name="healthz"),
    path("livez", livez, name="livez"),  # liveness: no dependency checked (core/views.py)
    path("favicon.ico", favicon, name="favicon"),
    path("", include("ops.urls")),  # /metrics (Prometheus)
    path("live/", include("live.urls")),
    path("approvals/", include("approvals.inbox.urls")),  # the approvers' inbox
    path("invitations/", include("members.urls")),  # an invitee's link (no login)
    path("sso/", include("sso.urls")),  # an agency's OpenID Connect sign-in (no login)
    # The admin index, where an approver is sent on to the inbox (ahead of the admin's own).
    path("admin/", admin.site.admin_view(admin_index), name="admin-index-landing"),
    path("admin/", admin.site.urls),
    path("api/", include("config.api_urls")),
]
