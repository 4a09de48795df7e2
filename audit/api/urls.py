from __future__ import annotations

from django.urls import path

from audit.api.views import AuditEntryExport

urlpatterns = [path("audit/entries/", AuditEntryExport.as_view(), name="audit-entries")]
