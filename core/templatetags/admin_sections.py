"""Breadcrumbs that name a page's section as the sidebar does (core/admin_navigation.py): the
theme's name Django's app ("Agencies and access > Events") where the sidebar groups by what staff
come for ("Agents & runs > Events")."""

from __future__ import annotations

from functools import cache
from typing import Any

from django import template
from django.apps import apps
from django.urls import NoReverseMatch, reverse

register = template.Library()


@cache
def _sections() -> dict[str, tuple[str, str]]:
    """{changelist URL: (sidebar group, sidebar item)}."""
    # Not at the top: Django loads template libraries while the admin's modules are imported
    # (core.admin_navigation's own imports among them), so the module would be half-initialised.
    from core.admin_navigation import GROUPS  # noqa: PLC0415

    found = {}
    for group, items in GROUPS:
        for title, _icon, label in items:
            opts = apps.get_model(label)._meta
            try:
                url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
            except NoReverseMatch:
                continue
            found[url] = (group, title)
    return found


@register.filter
def as_sidebar(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """unfold's header parts (app, model list, object ...) with the app and the model list named
    as in the sidebar; the section is not a link (the sidebar's groups are not either)."""
    named = list(parts)
    for index, part in enumerate(named):
        section = _sections().get(str(part.get("link") or ""))
        if section is None:
            continue
        named[index] = {**part, "title": section[1]}
        if index > 0:
            named[index - 1] = {"title": section[0], "link": ""}
        break
    return named
