"""A page's form as a browser would post it, read from its HTML: what the test client posts to
the agent editor (every field as the page shows it, then the test's changes)."""

from __future__ import annotations

from html.parser import HTMLParser


class _Form(HTMLParser):
    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.values: dict[str, str] = {}
        self._textarea: str | None = None
        self._select: str | None = None
        self._first_option: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside or "disabled" in a:
            return
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in {"checkbox", "radio"}:
                if "checked" in a:
                    self.values[name] = a.get("value", "on")
            elif kind not in {"submit", "button", "file", "image", "reset"}:
                self.values[name] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.values[name] = ""
        elif tag == "select" and name:
            self._select, self._first_option = name, None
        elif tag == "option" and self._select is not None:
            value = a.get("value", "")
            if self._first_option is None:
                self._first_option = value
            if "selected" in a:
                self.values[self._select] = value

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select" and self._select is not None:
            # A single select with nothing marked posts its first option, as a browser does.
            if self._select not in self.values and self._first_option is not None:
                self.values[self._select] = self._first_option
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            text = data[1:] if not self.values[self._textarea] and data[:1] == "\n" else data
            self.values[self._textarea] += text


def form_values(html: str, *, form_id: str) -> dict[str, str]:
    """The fields of the form ``form_id`` with the values the page shows (a multiple select
    keeps its last selected option only: the agent editor has none)."""
    parser = _Form(form_id)
    parser.feed(html)
    return parser.values
