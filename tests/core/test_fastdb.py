"""core.fastdb writes the row ``save()`` would write, without the ORM's per-call compilation."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest

from agents.models import ExecutionStep, StepType
from core import fastdb, tenancy
from tests.agents.factories import ExecutionFactory

pytestmark = pytest.mark.django_db

# Everything but the primary key and the two timestamps the database sets differently each time.
COMPARED = [
    f.attname
    for f in ExecutionStep._meta.concrete_fields
    if f.attname not in {"id", "created_at", "updated_at"}
]


def _stored(step_id: uuid.UUID) -> dict[str, Any]:
    return ExecutionStep.objects.values(*COMPARED, "created_at", "updated_at").get(pk=step_id)


def test_row_from_values_equals_the_row_save_writes_with_defaults_and_timestamps() -> None:
    execution = ExecutionFactory.create()
    values: dict[str, Any] = {
        "agency_id": execution.agency_id,
        "execution_id": execution.id,
        "step_type": StepType.THINK,
        "reasoning": "thinking",
        "llm_response": {"role": "assistant", "content": "hi", "n": [1, 2]},
        "cost_usd": Decimal("0.0012345"),  # more places than the field: both round it alike
    }
    with tenancy.agency_context(execution.agency_id):
        saved = ExecutionStep(id=uuid.uuid4(), step_number=1, **values)
        saved.save()
        built = uuid.uuid4()
        fastdb.execute(fastdb.row(ExecutionStep, {"id": built, "step_number": 2, **values}))
        by_save, by_row = _stored(saved.id), _stored(built)

    same = [name for name in COMPARED if name != "step_number"]
    assert {name: by_row[name] for name in same} == {name: by_save[name] for name in same}
    assert by_row["cost_usd"] == Decimal("0.001235")
    assert by_row["tokens_input"] == 0
    assert by_row["tool_input"] is None
    assert by_row["created_at"] is not None
    assert by_row["updated_at"] == by_row["created_at"]


def test_row_refuses_a_field_the_model_does_not_have() -> None:
    with pytest.raises(TypeError, match="stepnumber"):
        fastdb.row(ExecutionStep, {"stepnumber": 1})
