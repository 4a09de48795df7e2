"""Bytes of a fetched page to text: charset detection and HTML to readable text (stdlib only)."""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.I)


def decode_body(data: bytes, header_charset: str | None, *, is_html: bool) -> str:
    """Decode with the header's charset, else an HTML ``<meta charset>``, else UTF-8 (lenient)."""
    candidates = [header_charset]
    if is_html and (match := _META_CHARSET.search(data[:4096])):
        candidates.append(match.group(1).decode("ascii"))
    for name in candidates:
        if name:
            try:
                codecs.lookup(name)
            except LookupError:
                continue
            return data.decode(name, errors="replace")
    return data.decode("utf-8", errors="replace")


class _HTMLText(HTMLParser):
    # Content that is never readable text. (script/style bodies are raw text to the parser.)
    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object"})
    _BLOCK = frozenset(
        {
            *("address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt"),
            *("figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6"),
            *("header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table"),
            *("td", "th", "tr", "ul"),
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self._skip_depth = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip_depth += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self._BLOCK:
            self.parts.append("\n- " if tag == "li" else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
        elif not self._skip_depth:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML document, scripts and styles removed, whitespace tidied."""
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return " ".join("".join(parser.title_parts).split()), text
