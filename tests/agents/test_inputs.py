"""An agent's declared inputs (agents/inputs.py): which schemas may be declared, a run's data
checked against them, and what the run's model is given."""

from __future__ import annotations

from typing import Any

import pytest

from agents.inputs import InvalidInputSchema, input_error, validate_input_schema
from agents.models import Execution, TriggerType
from agents.runtime.context import initial_messages

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


def test_a_manual_runs_model_is_given_its_declared_inputs_after_its_instruction() -> None:
    snapshot: Any = {"system_prompt": "You help.", "inputs": ["client", "year"]}
    data = {"client": "Ada", "session_id": "s-1", "_via": "mcp"}

    def first(trigger_type: str, text: str, inputs: Any = snapshot) -> str:
        run = Execution(trigger_type=trigger_type, input=text, trigger_data=data)
        return initial_messages(inputs, run)[-1].content

    assert first(TriggerType.MANUAL, "Renewals?") == 'Renewals?\n\nInputs:\n{\n "client": "Ada"\n}'
    assert first(TriggerType.MANUAL, "Hi", {"system_prompt": "-"}) == "Hi"  # none declared
    assert first(TriggerType.EVENT, "Hi") == "Hi"
    assert first(TriggerType.MANUAL, "").startswith("You were triggered with:")  # all its data
