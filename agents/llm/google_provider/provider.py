"""The Google Gemini provider (the Gemini API through the official ``google-genai`` SDK)."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pydantic
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from google.genai.client import DebugConfig

from agents.llm.base import CompletionRequest, Provider, Sleep
from agents.llm.endpoints import http_client
from agents.llm.errors import LLMConfigurationError, LLMError, LLMUnavailable
from agents.llm.google_provider.stream import StreamState
from agents.llm.google_provider.wire import (
    check_reply,
    finish_reason_name,
    reply_parts,
    stop_reason,
    to_google_contents,
    to_google_tools,
    tool_call_from_part,
    usage_from_google,
    visible_text,
)
from agents.llm.retry import (
    connection_error,
    error_for_status,
    malformed_response,
    parse_retry_after,
    reading_response,
    stream_ended_early,
    timeout_error,
)
from agents.llm.tls import shared_ssl_context
from agents.llm.types import (
    Completion,
    ProviderConfig,
    StreamDone,
    StreamEvent,
)

# The Gemini API's version the gateway speaks (function calling with JSON Schema parameters).
API_VERSION = "v1beta"
DEFAULT_HOST = "generativelanguage.googleapis.com"
# Fields of the SDK's response object that are the SDK's, not the reply's.
_NOT_THE_REPLY = {"sdk_http_response", "automatic_function_calling_history"}


class GoogleProvider(Provider):
    kind = "google"

    def __init__(self, config: ProviderConfig, *, api_key: str, sleep: Sleep = time.sleep) -> None:
        super().__init__(config, api_key=api_key, sleep=sleep)
        context = shared_ssl_context()
        self._http = http_client(httpx2.Client, config.base_url)
        self._async_http = httpx2.AsyncClient(verify=context, trust_env=False)
        options = types.HttpOptions(
            # None: the SDK's host, or the operator's GOOGLE_GEMINI_BASE_URL.
            base_url=config.base_url,
            # Explicit, so that GOOGLE_GENAI_API_VERSION cannot change the wire under us.
            api_version=API_VERSION,
            timeout=_milliseconds(config.timeout),
            httpx_client=self._http,
            # Never used (the gateway is synchronous) but built by the SDK unless given: given
            # one on the shared SSL context, as is the websocket's ("ssl"), so that no client
            # loads the CA bundle again (agents/llm/tls.py).
            httpx_async_client=self._async_http,
            async_client_args={"ssl": context},
        )
        self._client = genai.Client(
            # The Gemini API with an API key, whatever GOOGLE_GENAI_USE_VERTEXAI says.
            vertexai=False,
            api_key=api_key,
            http_options=options,
            # Not GOOGLE_GENAI_CLIENT_MODE's record/replay client: the real one.
            debug_config=DebugConfig(client_mode=None, replays_directory=None, replay_id=None),
        )

    def close(self) -> None:
        # The SDK leaves a client it was given open: the pool is ours to close.
        self._client.close()
        self._http.close()
        _close_unused(self._async_http)

    def _arguments(self, request: CompletionRequest) -> dict[str, Any]:
        system, contents = to_google_contents(request.messages)
        config = types.GenerateContentConfig(
            system_instruction=system,
            max_output_tokens=request.max_tokens,
            temperature=request.temperature,
            http_options=types.HttpOptions(
                timeout=_milliseconds(request.attempt_timeout(self.config.timeout))
            ),
            # The gateway runs the tools (the runtime's policy, approvals and records): the SDK
            # must neither call Python functions itself nor send follow-up requests of its own.
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            automatic_continuation=False,
        )
        if request.tools:
            config.tools = list(to_google_tools(request.tools))
        return {"model": request.model, "contents": contents, "config": config}

    def _complete_once(self, request: CompletionRequest, attempt: int) -> Completion:
        response = self._client.models.generate_content(**self._arguments(request))
        with reading_response(self.kind):
            return self._completion(response, request, attempt)

    def _completion(
        self, response: types.GenerateContentResponse, request: CompletionRequest, attempt: int
    ) -> Completion:
        candidate = response.candidates[0] if response.candidates else None
        blocked = response.prompt_feedback.block_reason if response.prompt_feedback else None
        if candidate is None and blocked is None:
            raise malformed_response(provider=self.kind, detail="the response has no candidates")
        parts = reply_parts(candidate)
        ids: set[str] = set()
        calls = tuple(
            tool_call_from_part(part.function_call, ids=ids, position=position)
            for position, part in enumerate(part for part in parts if part.function_call)
            if part.function_call is not None
        )
        raw_reason = finish_reason_name(
            candidate.finish_reason if candidate is not None else blocked
        )
        check_reply(raw_reason, calls)
        return Completion(
            text=visible_text(parts),
            tool_calls=calls,
            usage=usage_from_google(response.usage_metadata),
            stop_reason="refusal" if candidate is None else stop_reason(raw_reason, calls),
            raw_stop_reason=raw_reason,
            model=response.model_version or request.model,
            provider="google",
            raw=response.model_dump(
                mode="json", by_alias=True, exclude_none=True, exclude=_NOT_THE_REPLY
            ),
            latency_ms=self.elapsed_ms(request),
            attempts=attempt,
        )

    def _stream_once(self, request: CompletionRequest, attempt: int) -> Iterator[StreamEvent]:
        chunks = self._client.models.generate_content_stream(**self._arguments(request))
        state = StreamState(model=request.model)
        try:
            with reading_response(self.kind):
                for chunk in chunks:
                    yield from state.add_chunk(chunk)
        finally:
            # The response is released now (the connection back to the pool), not when the
            # SDK's generator is collected.
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        # The SDK ends the iteration alike after the last chunk and when the body just stops:
        # the reply is whole only if a chunk said why it finished.
        if not state.finished:
            raise stream_ended_early(provider=self.kind, detail="no chunk with a finishReason")
        calls = tuple(state.calls)
        raw_reason = state.finish_reason or state.block_reason
        check_reply(raw_reason, calls)
        yield StreamDone(
            Completion(
                text="".join(state.text),
                tool_calls=calls,
                usage=state.usage,
                stop_reason=(
                    "refusal"
                    if state.finish_reason is None
                    else stop_reason(state.finish_reason, calls)
                ),
                raw_stop_reason=raw_reason,
                model=state.model,
                provider="google",
                raw=state.raw(),
                latency_ms=self.elapsed_ms(request),
                attempts=attempt,
            )
        )

    def _classify(self, exc: Exception) -> LLMError | None:
        if isinstance(exc, genai_errors.APIError):
            return self._status_error(exc)
        if isinstance(exc, httpx2.TimeoutException):
            return timeout_error(provider=self.kind, timeout=self.config.timeout)
        if isinstance(exc, httpx2.TransportError):
            where = self.config.base_url or DEFAULT_HOST
            return connection_error(provider=self.kind, base_url=where, detail=str(exc))
        if isinstance(exc, json.JSONDecodeError):
            return LLMUnavailable(
                f"The google provider sent a response that is not JSON: {exc}", provider=self.kind
            )
        if isinstance(exc, (pydantic.ValidationError, genai_errors.UnknownApiResponseError)):
            return malformed_response(provider=self.kind, detail=str(exc))
        return None

    def _status_error(self, exc: genai_errors.APIError) -> LLMError:
        status = exc.code if isinstance(exc.code, int) else 500
        detail = str(exc.message or exc.status or exc)
        headers: Any = getattr(exc.response, "headers", None)
        retry_after = parse_retry_after(_lower(headers)) if headers is not None else None
        if retry_after is None:
            retry_after = _retry_delay(exc.details)
        if status < 400:  # an error inside a 200 stream that names no HTTP status
            status = 500
        if status == 400 and _api_key_invalid(exc.details):
            # Gemini answers a wrong key with a 400, where OpenAI and Anthropic say 401: the
            # agency's configuration, not a bad request.
            return LLMConfigurationError(
                f"The {self.kind} provider rejected the API key (HTTP 400 API_KEY_INVALID): "
                f"{detail}. Check the key on the agency's LLM provider in admin or in the "
                "environment.",
                provider=self.kind,
                status_code=status,
            )
        return error_for_status(status, detail, provider=self.kind, retry_after=retry_after)


def _milliseconds(seconds: float) -> int:
    # The SDK takes whole milliseconds; never 0 (that would mean no timeout at all).
    return max(1, math.ceil(seconds * 1000))


def _retry_delay(details: object) -> float | None:
    """The seconds of the RetryInfo detail Google's errors carry (a 429's ``retryDelay``,
    "37s"), in place of a Retry-After header."""
    error = details.get("error") if isinstance(details, dict) else None
    for detail in (error or {}).get("details") or [] if isinstance(error, dict) else []:
        if not isinstance(detail, dict) or not str(detail.get("@type", "")).endswith("RetryInfo"):
            continue
        delay = str(detail.get("retryDelay", "")).removesuffix("s")
        try:
            seconds = float(delay)
        except ValueError:
            return None
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    return None


def _api_key_invalid(details: object) -> bool:
    """Whether the error's ErrorInfo detail gives the reason ``API_KEY_INVALID``."""
    error = details.get("error") if isinstance(details, dict) else None
    found = error.get("details") if isinstance(error, dict) else None
    return any(
        isinstance(detail, dict) and detail.get("reason") == "API_KEY_INVALID"
        for detail in (found if isinstance(found, list) else [])
    )


def _close_unused(client: httpx2.AsyncClient) -> None:
    """Close the async client the SDK was given. It is never used (the gateway is synchronous),
    so its pool holds no connection, but closing it still wants an event loop: its own, here or
    (when this thread runs one) in a short-lived thread."""
    if client.is_closed:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(client.aclose())
        return
    thread = threading.Thread(target=asyncio.run, args=(client.aclose(),), name="gemini-close")
    thread.start()
    thread.join()


def _lower(headers: Any) -> dict[str, str]:
    """The headers with lower-case names: an error inside a stream carries the SDK's plain dict
    of the response's headers, an HTTP error the HTTP library's (case-insensitive) headers."""
    return {str(name).lower(): str(value) for name, value in headers.items()}
