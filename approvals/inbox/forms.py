"""The inbox's small forms: a deny with its reason, an answer to a question. The edit form of a
call's arguments is built from the tool's schema (:mod:`approvals.inbox.schema_form`)."""

from __future__ import annotations

from typing import Any

from django import forms

from approvals.questions import ANSWER_MAX_CHARS
from approvals.services import REASON_MAX_CHARS

CANCEL_RUN = "cancel"
CONTINUE_RUN = "continue"


class DenyForm(forms.Form):
    reason = forms.CharField(
        label="Why is this denied?",
        max_length=REASON_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Kept with the decision; the agent is told it if its run continues.",
        error_messages={"required": "Say why the action is denied."},
    )
    then = forms.ChoiceField(
        label="Then",
        choices=[
            (CANCEL_RUN, "Cancel the run"),
            (CONTINUE_RUN, "Tell the agent no and let it continue"),
        ],
        initial=CANCEL_RUN,
        widget=forms.RadioSelect,
    )

    def __init__(self, *args: Any, may_continue: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not may_continue:  # the agent's deny_may_continue is off: a deny ends the run
            del self.fields["then"]

    @property
    def continue_run(self) -> bool:
        return self.cleaned_data.get("then") == CONTINUE_RUN


class AnswerForm(forms.Form):
    """A typed answer (the options are buttons posting ``answer`` directly), or a hint."""

    answer = forms.CharField(
        label="Your answer",
        max_length=ANSWER_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "Write an answer."},
    )
