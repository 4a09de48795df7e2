"""Web tools: search through the configured provider, and a safe fetch of one page.

``web_scrape`` goes through :func:`tools.net.fetch` with its safe defaults only (public addresses,
pinned after resolution, size and time limits); nothing here can widen them.
"""

from __future__ import annotations

from typing import Any

from tools import web_search
from tools.builtin import _args
from tools.handlers import ToolContext, ToolError
from tools.net import FetchError, fetch
from tools.registry import handler

MAX_SEARCH_RESULTS = 10
SCRAPE_TEXT_CHARS = 12_000  # ~3k tokens: enough to read a page, not enough to flood the context


@handler("web_search")
def web_search_tool(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    query = _args.text(args, "query", max_length=web_search.MAX_QUERY_CHARS, required=True)
    count = _args.bounded_int(args, "num_results", default=5, high=MAX_SEARCH_RESULTS)
    try:
        results = web_search.search(query, max_results=count)
    except web_search.WebSearchError as exc:  # includes WebSearchNotConfigured ("not_configured")
        raise ToolError(exc.code, exc.message) from None
    return {
        "query": query,
        "results": [
            {
                "title": _args.truncate(r.title, 200),
                "url": r.url,
                "snippet": _args.truncate(r.snippet, 400),
            }
            for r in results
        ],
        "count": len(results),
    }


@handler("web_scrape")
def web_scrape(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    url = _args.text(args, "url", max_length=2_000, required=True)
    try:
        page = fetch(url, max_text_chars=SCRAPE_TEXT_CHARS)
    except FetchError as exc:
        details: dict[str, Any] = {"url": exc.url or url}
        if exc.status is not None:
            details["status"] = exc.status
        raise ToolError(exc.code, exc.message, **details) from None
    output: dict[str, Any] = {
        "url": page.final_url,
        "status": page.status,
        "content_type": page.content_type,
        "title": _args.truncate(page.title, 300),
        "text": page.text,
        "truncated": page.truncated,
    }
    if args.get("selector"):
        # The fetcher returns the page's readable text, not a DOM: a CSS selector cannot apply.
        output["note"] = (
            "The 'selector' argument is not supported; the whole page text is returned."
        )
    return output
