"""Query filters that mean what the schema says.

django-filter lets a value it cannot use pass as "no filter": ``?is_active=maybe``, ``?site=``,
``?status=`` list everything, and a well-formed id of no row (``?agent=<uuid>``) is a 400 "Select
a valid choice". Here a filter value is either used or refused (400), and a reference to another
row filters by its id: an id of no row of yours lists nothing, like any filter that matches
nothing. :class:`FilterSet` is the base of every filter set of the API (the backend's too, for
views that only name ``filterset_fields``).
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db import models
from django_filters.rest_framework import DjangoFilterBackend
from django_filters.rest_framework.filterset import FILTER_FOR_DBFIELD_DEFAULTS
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

BOOLEAN_VALUES = frozenset({"true", "false"})


class StrictFilterForm(forms.Form):
    """Refuses what the filters would silently skip: an empty value where the schema has no
    empty value, and a boolean that is neither ``true`` nor ``false``."""

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        for name, field in self.fields.items():
            if name not in self.data or isinstance(field, forms.MultipleChoiceField):
                continue
            value = self.data.get(name)
            free_text = isinstance(field, forms.CharField) and not isinstance(
                field, forms.UUIDField
            )
            if isinstance(field, forms.NullBooleanField):
                if value not in BOOLEAN_VALUES:
                    self.add_error(name, "Must be true or false.")
            elif value == "" and not free_text:
                self.add_error(name, "Give a value, or leave the parameter out.")
        return cleaned


class FilterSet(django_filters.rest_framework.FilterSet):
    FILTER_DEFAULTS = {
        **FILTER_FOR_DBFIELD_DEFAULTS,
        # By id, not by looking the row up (a missing row is an empty list, not a 400).
        models.ForeignKey: {"filter_class": django_filters.UUIDFilter},
        models.OneToOneField: {"filter_class": django_filters.UUIDFilter},
    }

    def get_form_class(self) -> type[forms.Form]:
        base = super().get_form_class()
        return type(f"{type(self).__name__}Form", (StrictFilterForm, base), {})


class FilterBackend(DjangoFilterBackend):
    filterset_base = FilterSet


def multi_valued_params(view: Any) -> frozenset[str]:
    """Query parameters of ``view`` that may be given more than once (multiple-choice filters)."""
    filterset_class = getattr(view, "filterset_class", None)
    if filterset_class is None:
        return frozenset()
    return frozenset(
        name
        for name, query_filter in filterset_class.base_filters.items()
        if issubclass(query_filter.field_class, forms.MultipleChoiceField)
    )


def refuse_repeated_params(request: Request, view: Any) -> None:
    """A parameter the schema gives one value (all but multiple-choice filters) given more than
    once is a 400: which of the values counts would be a guess."""
    allowed = multi_valued_params(view)
    repeated = sorted(
        name
        for name, values in request.query_params.lists()
        if len(values) > 1 and name not in allowed
    )
    if repeated:
        raise ValidationError({name: ["Give this parameter once."] for name in repeated})
