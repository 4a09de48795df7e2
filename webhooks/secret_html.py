"""A secret shown once in an admin message, with a button that copies it (inbound and outbound
webhooks' admins)."""

from __future__ import annotations

from django.utils.html import format_html
from django.utils.safestring import SafeString

# The secret, shown once in a message: one tap copies it (Alpine.js, which unfold loads on every
# admin page); where the browser has no clipboard API (plain http), the tap selects it for the
# system's copy. It breaks anywhere, so that it never pushes a phone's screen sideways.
_SHOWN_ONCE_HTML = (
    '<span x-data="{{copied: false}}" style="overflow-wrap: anywhere">{} '
    '<code x-ref="secret" data-webhook-secret '
    'style="word-break: break-all; user-select: all">{}</code> '
    '<button type="button" data-copy-secret class="border font-medium px-2 rounded-default" '
    'style="border-color: currentColor" '
    '@click="const text = $refs.secret.textContent; (navigator.clipboard '
    "? navigator.clipboard.writeText(text) : Promise.reject()).catch(() => "
    "{{ getSelection().selectAllChildren($refs.secret); document.execCommand('copy') }})"
    ".then(() => copied = true)\" x-text=\"copied ? 'Copied' : 'Copy secret'\">Copy secret"
    "</button> {}</span>"
)


def shown_once(before: str, secret: str, after: str) -> SafeString:
    """A message with ``secret`` between two texts and a button that copies it."""
    return format_html(_SHOWN_ONCE_HTML, before, secret, after)
