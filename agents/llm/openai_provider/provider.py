"""The OpenAI Chat Completions provider."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
)

from agents.llm.base import CompletionRequest, Provider, Sleep
from agents.llm.endpoints import http_client, refuse_environment_headers
from agents.llm.errors import LLMError, LLMUnavailable
from agents.llm.openai_provider.stream import StreamState
from agents.llm.openai_provider.wire import (
    check_tool_calls_present,
    stop_reason,
    to_openai_messages,
    to_openai_tools,
    tool_calls_from_openai,
    usage_from_openai,
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
from agents.llm.types import (
    Completion,
    ProviderConfig,
    StreamDone,
    StreamEvent,
    TextDelta,
    UsageUpdate,
)

logger = logging.getLogger(__name__)

# How OpenAI answers a request with a parameter the model does not take (its reasoning models
# take only their default temperature): a 400 naming the parameter, with one of these codes.
UNSUPPORTED_PARAMETER_CODES = frozenset({"unsupported_value", "unsupported_parameter"})


class OpenAIProvider(Provider):
    def __init__(self, config: ProviderConfig, *, api_key: str, sleep: Sleep = time.sleep) -> None:
        super().__init__(config, api_key=api_key, sleep=sleep)
        self.kind = config.kind
        headers: dict[str, Any] | None = None
        if config.base_url is not None:
            # An agency's endpoint: none of the platform's OPENAI_* headers (the SDK reads
            # OPENAI_ORG_ID and OPENAI_PROJECT_ID when not given them, and custom headers).
            refuse_environment_headers("OPENAI_CUSTOM_HEADERS")
            headers = {
                "OpenAI-Organization": config.organization or openai.Omit(),
                "OpenAI-Project": openai.Omit(),
            }
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=config.base_url,
            organization=config.organization,
            timeout=config.timeout,
            max_retries=0,
            default_headers=headers,
            http_client=http_client(openai.DefaultHttpxClient, config.base_url),
        )
        # Models that refused a temperature: left out of their requests from then on.
        self._without_temperature: set[str] = set()

    def close(self) -> None:
        self._client.close()

    def _create_kwargs(self, request: CompletionRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": to_openai_messages(request.messages),
        }
        if request.tools:
            kwargs["tools"] = to_openai_tools(request.tools)
        if request.temperature is not None and request.model not in self._without_temperature:
            kwargs["temperature"] = request.temperature
        # OpenAI deprecated max_tokens for its own models; local servers mostly know only it.
        limit_name = "max_completion_tokens" if self.kind == "openai" else "max_tokens"
        kwargs[limit_name] = request.max_tokens
        return kwargs

    def _post(
        self, request: CompletionRequest, body: dict[str, Any], *, stream: bool = False
    ) -> Any:
        """Send ``body``; a model that refuses the temperature gets the request again without
        it (once, in the same attempt) and never again: OpenAI's reasoning models (o1, o3,
        gpt-5...) take only their default and answer any other value with a 400 naming
        ``temperature``. The agent's setting stays as it is; it applies wherever it is taken."""
        try:
            return self._send(request, body, stream=stream)
        except openai.BadRequestError as exc:
            if "temperature" not in body or not _refuses_parameter(exc.body, "temperature"):
                raise
        self._without_temperature.add(body["model"])
        logger.warning(
            "%s model %r does not take a temperature: sending its requests without one",
            self.kind,
            body["model"],
        )
        return self._send(
            request, {k: v for k, v in body.items() if k != "temperature"}, stream=stream
        )

    def _send(self, request: CompletionRequest, body: dict[str, Any], *, stream: bool) -> Any:
        # `chat.completions.create` re-walks the whole message history against the SDK's
        # TypedDicts on every call (O(history), ~18 ms at 100 messages); our body is already in
        # wire shape, so it goes through the client's documented low-level `post`, which keeps
        # the client's auth, base URL, timeouts and error types, and parses into the same models.
        return self._client.post(
            "/chat/completions",
            body=body,
            cast_to=ChatCompletion,
            options={
                "security": {"bearer_auth": True},
                "timeout": request.attempt_timeout(self.config.timeout),
            },
            stream=stream,
            stream_cls=openai.Stream[ChatCompletionChunk],
        )

    def _complete_once(self, request: CompletionRequest, attempt: int) -> Completion:
        response: ChatCompletion = self._post(request, self._create_kwargs(request))
        with reading_response(self.kind):
            return self._completion(response, request, attempt)

    def _completion(
        self, response: ChatCompletion, request: CompletionRequest, attempt: int
    ) -> Completion:
        if not response.choices:
            raise malformed_response(provider=self.kind, detail="the response has no choices")
        choice = response.choices[0]
        if choice.message is None:
            raise malformed_response(provider=self.kind, detail="the choice has no message")
        calls = tool_calls_from_openai(choice.message.tool_calls or (), provider=self.kind)
        check_tool_calls_present(choice.finish_reason, calls, provider=self.kind)
        return Completion(
            text=choice.message.content or "",
            tool_calls=calls,
            usage=usage_from_openai(response.usage),
            stop_reason=stop_reason(choice.finish_reason, calls),
            raw_stop_reason=choice.finish_reason,
            model=response.model,
            provider=self.kind,
            raw=response.model_dump(mode="json", warnings=False),
            latency_ms=self.elapsed_ms(request),
            attempts=attempt,
        )

    def _stream_once(self, request: CompletionRequest, attempt: int) -> Iterator[StreamEvent]:
        body = self._create_kwargs(request)
        body.update(stream=True, stream_options={"include_usage": True})
        chunks: openai.Stream[ChatCompletionChunk] = self._post(request, body, stream=True)
        state = StreamState(model=request.model)
        with chunks, reading_response(self.kind):
            for chunk in chunks:
                state.response_id = chunk.id or state.response_id
                state.model = chunk.model or state.model
                if chunk.usage is not None:
                    state.usage = chunk.usage
                    yield UsageUpdate(usage_from_openai(chunk.usage))
                for choice in (chunk.choices or ())[:1]:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        state.text.append(delta.content)
                        yield TextDelta(delta.content)
                    for call in (delta.tool_calls if delta is not None else None) or ():
                        yield state.add_delta(call)
                    if choice.finish_reason is not None:
                        state.finish_reason = choice.finish_reason
                        yield from state.finish_calls(self.kind)
        # The SDK ends the iteration alike at `[DONE]` and when the body just stops, so the
        # reply is whole only if its finish chunk came, and (from OpenAI itself, which honours
        # include_usage) the usage chunk after it. Local servers may not send usage at all.
        if state.finish_reason is None:
            raise stream_ended_early(provider=self.kind, detail="no chunk with a finish_reason")
        if state.usage is None and self.kind == "openai":
            raise stream_ended_early(provider=self.kind, detail="no usage chunk")
        calls = tuple(call for _, call in sorted(state.completed.items()))
        check_tool_calls_present(state.finish_reason, calls, provider=self.kind)
        yield StreamDone(
            Completion(
                text="".join(state.text),
                tool_calls=calls,
                usage=usage_from_openai(state.usage),
                stop_reason=stop_reason(state.finish_reason, calls),
                raw_stop_reason=state.finish_reason,
                model=state.model,
                provider=self.kind,
                raw=state.raw(),
                latency_ms=self.elapsed_ms(request),
                attempts=attempt,
            )
        )

    def _classify(self, exc: Exception) -> LLMError | None:
        where = self.config.base_url or "api.openai.com"
        if isinstance(exc, openai.APITimeoutError):
            return timeout_error(provider=self.kind, timeout=self.config.timeout)
        if isinstance(exc, openai.APIConnectionError):
            return connection_error(provider=self.kind, base_url=where, detail=str(exc))
        if isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            detail = str(body.get("message") or exc.message)
            retry_after = parse_retry_after(exc.response.headers)
            return error_for_status(
                exc.status_code, detail, provider=self.kind, retry_after=retry_after
            )
        if isinstance(exc, openai.OpenAIError):
            return LLMUnavailable(f"The {self.kind} provider failed: {exc}", provider=self.kind)
        if isinstance(exc, json.JSONDecodeError):
            return LLMUnavailable(
                f"The {self.kind} provider sent a response that is not JSON: {exc}",
                provider=self.kind,
            )
        return None


def _refuses_parameter(error: object, parameter: str) -> bool:
    """Whether an error body (the SDK's ``exc.body``: the ``error`` object) says the model does
    not take ``parameter`` or its value: a 400 whose ``param`` names it, coded as unsupported."""
    return (
        isinstance(error, dict)
        and error.get("param") == parameter
        and error.get("code") in UNSUPPORTED_PARAMETER_CODES
    )
