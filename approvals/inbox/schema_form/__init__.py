"""A Django form for a tool's arguments, built from the tool's JSON Schema (its top-level
``properties``), so an approver can edit a proposed call before approving it.

Deliberately small: the form is a convenience for people, not the validator. The service
(``approval_decide``) validates the edited arguments with the tool's own JSON Schema validator and
its errors come back onto the fields here (:meth:`ArgumentsForm.add_argument_errors`). Why not a
JavaScript schema-form library: docs/decisions/0005-approver-inbox.md.

Mapping (per property): string -> text input (a textarea for long text), ``enum`` -> select,
``format: email`` -> e-mail field; integer -> integer field (``minimum`` / ``maximum``); number
-> float field; boolean -> checkbox; array of strings or numbers -> a textarea, one item per line
(checkboxes when the items have an ``enum``); anything else (objects, arrays of objects, no type)
-> a JSON textarea. ``required`` is honoured; descriptions become help texts. Arguments the model
sent that the schema does not name (allowed unless ``additionalProperties`` is false) get a field
inferred from their value, so an edit never drops them silently.

``schema`` reads the schema, ``fields`` holds the fields Django lacks, ``form`` builds the form.
"""

from approvals.inbox.schema_form.fields import JSONTextField, LinesField, TextField
from approvals.inbox.schema_form.form import ArgumentsForm
from approvals.inbox.schema_form.schema import (
    argument_label,
    field_order,
    required_order,
    schema_from_arguments,
)

__all__ = [
    "ArgumentsForm",
    "JSONTextField",
    "LinesField",
    "TextField",
    "argument_label",
    "field_order",
    "required_order",
    "schema_from_arguments",
]
