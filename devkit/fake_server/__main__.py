"""`python -m devkit.fake_server --port 8765 [--latency 1.0]`: a fake provider for local
development. Point an `openai_compatible` provider at http://127.0.0.1:8765/v1, or an Anthropic or
a Google one at http://127.0.0.1:8765; every request gets a plain answer quoting the last user
message."""

from __future__ import annotations

import argparse
import sys

from devkit.fake_server import FakeProviderServer, echo_responder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devkit.fake_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    args = parser.parse_args(argv)
    server = FakeProviderServer(host=args.host, port=args.port, latency=args.latency, record=False)
    server.set_responder(echo_responder)
    sys.stdout.write(
        f"fake LLM provider listening\n  OpenAI-compatible base URL: {server.openai_base_url}\n"
        f"  Anthropic base URL:         {server.anthropic_base_url}\n"
        f"  Google base URL:            {server.google_base_url}\n"
    )
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
