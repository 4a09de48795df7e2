"""Human labels for admin columns and filters of fields whose models cannot name them
themselves (a model module another change owns): a list filter under a title of its own."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

# A link inside a table cell or a read-only field, coloured as the theme colours links.
LINK = '<a href="{}" class="text-primary-600 dark:text-primary-500">{}</a>'


def titled(
    title: str, base: type[admin.FieldListFilter] = admin.BooleanFieldListFilter
) -> type[admin.FieldListFilter]:
    """``base`` (a field's list filter) headed ``title`` instead of the field's verbose name:
    ``list_filter = [("is_active", titled("active"))]``."""

    class Titled(base):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.title = title

    Titled.__name__ = Titled.__qualname__ = f"{base.__name__}Titled"
    return Titled
