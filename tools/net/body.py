"""Reading a response body with ``max_bytes`` counted after decoding: what is held in memory.

The request asks for ``Accept-Encoding: identity``, but a server may compress anyway, and httpx
decodes gzip, deflate, br and zstd whatever was asked, a whole network read at a time: 32 KB of
zstd became 2 GB in memory. So the body is read raw (``iter_raw``) and decoded here:

- identity: as is;
- gzip: with zlib's ``max_length``, so never more than the limit (+1 byte, to tell "over") is
  inflated, however small the input. Kept because some servers gzip whatever was asked (stored
  pre-compressed files, e.g. objects on S3 with ``Content-Encoding: gzip``) and the standard
  library can bound it exactly;
- anything else (br, zstd, deflate, stacked codings): refused, ``unsupported_encoding``. A
  server answering ``identity`` with those is rare, and bounding them would take third-party
  decoders (deflate's zlib-or-raw ambiguity included) for pages almost no one serves that way.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import httpx

from tools.net.errors import FetchError

_GZIP = frozenset({"gzip", "x-gzip"})  # x-gzip: the old name, RFC 9110 section 8.4.1.3
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate data


@dataclass(frozen=True, slots=True)
class Body:
    data: bytes
    truncated: bool


def _is_gzip(response: httpx.Response, url: str) -> bool:
    """True for a gzip body, False for an unencoded one; raises for any other coding."""
    header = response.headers.get("content-encoding", "")
    codings = [c.strip().lower() for c in header.split(",")]
    codings = [c for c in codings if c not in ("", "identity")]
    if not codings:
        return False
    if len(codings) == 1 and codings[0] in _GZIP:
        return True
    msg = f"{url} was sent compressed as {header!r}; only gzip or uncompressed bodies are read."
    raise FetchError("unsupported_encoding", msg, url=url)


def _gunzip(chunks: Iterable[bytes], *, limit: int, url: str) -> Iterator[bytes]:
    """The decoded body, at most ``limit + 1`` bytes in all, one bounded piece at a time."""
    decoder = zlib.decompressobj(wbits=_GZIP_WBITS)
    room = limit + 1  # > 0 always: a max_length of 0 would mean "no limit"
    try:
        for chunk in chunks:
            pending = chunk
            while pending and room > 0 and not decoder.eof:
                piece = decoder.decompress(pending, room)
                room -= len(piece)
                pending = decoder.unconsumed_tail  # input left because the piece was full
                yield piece
            if room <= 0 or decoder.eof:  # over the limit, or the end (trailing bytes ignored)
                return
    except zlib.error as exc:
        msg = f"{url} sent a corrupt gzip body: {exc}."
        raise FetchError("http_error", msg, url=url) from None


def read_body(response: httpx.Response, *, max_bytes: int, truncate: bool, url: str) -> Body:
    """Read ``response``'s body, at most ``max_bytes`` once decoded: past it, keep the first
    ``max_bytes`` (``truncate``) or raise ``too_large``."""
    chunks: Iterable[bytes] = response.iter_raw()
    if _is_gzip(response, url):
        chunks = _gunzip(chunks, limit=max_bytes, url=url)
    else:
        declared = response.headers.get("content-length", "")  # for gzip: the compressed size
        if not truncate and declared.isdigit() and int(declared) > max_bytes:
            msg = f"{url} is {declared} bytes; the limit is {max_bytes}."
            raise FetchError("too_large", msg, url=url)
    buf = bytearray()
    for chunk in chunks:
        if len(buf) + len(chunk) > max_bytes:
            if not truncate:
                msg = f"{url} is larger than the limit of {max_bytes} bytes."
                raise FetchError("too_large", msg, url=url)
            buf += chunk[: max_bytes - len(buf)]
            return Body(bytes(buf), truncated=True)
        buf += chunk
    return Body(bytes(buf), truncated=False)
