"""An agent's declared inputs (agents/inputs.py): which schemas may be declared, a run's data
checked against them, and what the run's model is given."""

from __future__ import annotations

from typing import Any

import pytest

from agents.inputs import InvalidInputSchema, input_error, public_data, validate_input_schema
from agents.models import Execution, TriggerType

CLIENT = {
    "type": "object",
    "properties": {"client": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["client"],
}


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ([], "must be a JSON object"),
        ({"type": "array"}, '"type": "object"'),
        ({"type": "object"}, 'Name the inputs under "properties"'),
        ({"type": "object", "properties": {"wait_seconds": {}}}, "'wait_seconds' cannot be"),
        ({"type": "object", "properties": {"_via": {}}}, "names starting with _"),
        (
            {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
            "Only references inside the schema",
        ),
        ({"type": "object", "properties": {"a": {"type": "text"}}}, "Not a valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"pattern": "("}}}, "Not a valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"description": "x" * 20_001}}}, "characters"),
        (_deep(10), "Nested at most"),
    ],
)
def test_a_schema_that_cannot_declare_inputs_is_refused_saying_why(
    schema: Any, message: str
) -> None:
    with pytest.raises(InvalidInputSchema) as refused:
        validate_input_schema(schema)
    assert any(message in m for m in refused.value.messages), refused.value.messages


def test_none_or_an_object_schema_may_be_declared() -> None:
    validate_input_schema({})
    validate_input_schema(CLIENT)
    validate_input_schema(
        {
            "type": "object",
            "$defs": {"year": {"type": "integer"}},
            "properties": {"year": {"$ref": "#/$defs/year"}},
        }
    )


def test_data_is_checked_against_the_declared_inputs() -> None:
    assert input_error({}, {"anything": 1}) is None  # none declared
    assert input_error(CLIENT, {"client": "Ada", "year": 2025}) is None
    assert input_error(CLIENT, {"year": 2025}) == "'client' is a required property"
    assert input_error(CLIENT, {"client": 5}) == "client: 5 is not of type 'string'"


def test_a_manual_runs_model_is_given_its_data_beside_its_instruction() -> None:
    data = {"client": "Ada", "_via": "mcp"}
    assert public_data(data) == {"client": "Ada"}
    run = Execution(trigger_type=TriggerType.MANUAL, input="Renewals?", trigger_data=data)
    assert run.first_user_message() == 'Renewals?\n\nInputs:\n{\n "client": "Ada"\n}'
    only_platform = Execution(
        trigger_type=TriggerType.MANUAL, input="Hi", trigger_data={"_via": "a2a"}
    )
    assert only_platform.first_user_message() == "Hi"
    event = Execution(trigger_type=TriggerType.EVENT, input="Hi", trigger_data={"event_id": 1})
    assert event.first_user_message() == "Hi"
    no_instruction = Execution(trigger_type=TriggerType.MANUAL, input="", trigger_data=data)
    assert no_instruction.first_user_message().startswith("You were triggered with:")
