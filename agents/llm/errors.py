"""Typed failures of the provider gateway.

The runtime maps them to an execution's stop reason: a configuration error fails the execution at
once, a rate limit or an outage fails it after the retries the provider config allows.
"""

from __future__ import annotations


class LLMError(Exception):
    """Base of every error the gateway raises; SDK exceptions never leak past `agents.llm`."""

    code = "llm_error"
    retryable = False

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status_code: int | None = None,
        attempts: int = 1,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status_code = status_code
        self.attempts = attempts
        # The server's own hint (Retry-After), uncapped, so a caller can park and resume later.
        self.retry_after = retry_after

    def __str__(self) -> str:
        if self.attempts > 1:
            return f"{self.message} (after {self.attempts} attempts)"
        return self.message


class LLMConfigurationError(LLMError):
    """Missing or rejected credentials, unknown provider kind, missing model or base URL."""

    code = "llm_not_configured"


class LLMRateLimited(LLMError):
    """HTTP 429 that outlasted the retries."""

    code = "llm_rate_limited"
    retryable = True


class LLMUnavailable(LLMError):
    """5xx, timeouts and connection failures that outlasted the retries."""

    code = "llm_unavailable"
    retryable = True


class LLMDeadlineExceeded(LLMError):
    """The call (its retries and backoff included) ran out of the time its caller gave it: the
    runtime's run reached its ``timeout_seconds`` while the model was answering."""

    code = "llm_deadline"


class LLMBadRequest(LLMError):
    """The provider refused the request itself (400, 404, 422...): retrying cannot help."""

    code = "llm_bad_request"


def missing_key_error(kind: str, env_var: str) -> LLMConfigurationError:
    label = {"openai": "OpenAI", "anthropic": "Anthropic", "google": "Google Gemini"}.get(
        kind, kind
    )
    return LLMConfigurationError(
        f"No API key for the {label} provider. Set the API key on the agency's LLM provider "
        f"(admin: LLM providers, provider '{kind}') or set the {env_var} environment variable.",
        provider=kind,
    )
