"""Follow one execution live from a terminal (docs/live-protocol.md).

    python docs/examples/watch_execution.py http://127.0.0.1:8000 <execution id> --key adk_...

Prints the snapshot, each step and state change, and the model's text as it streams; on a dropped
connection it reconnects with ``?after=<last event number>``, so nothing is missed or printed
twice. Needs only the ``websockets`` package (installed with the platform). Exits when the run
ends.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

TERMINAL = {"completed", "failed", "cancelled", "timed_out"}
FINAL_CLOSE_CODES = {4400: "bad request", 4401: "not authenticated", 4404: "no such execution"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server", help="e.g. http://127.0.0.1:8000")
    parser.add_argument("execution_id")
    parser.add_argument("--key", required=True, help="an API key of the execution's agency")
    args = parser.parse_args()
    base = args.server.rstrip("/").replace("https://", "wss://").replace("http://", "ws://")
    last_seq = 0
    status = ""
    while status not in TERMINAL:
        url = f"{base}/ws/executions/{args.execution_id}/?after={last_seq}"
        try:
            with connect(url, additional_headers={"Authorization": f"Bearer {args.key}"}) as ws:
                for raw in ws:
                    message = json.loads(raw)
                    kind = message["type"]
                    if kind == "snapshot":
                        status = message["status"]
                        totals = message["totals"]
                        print(
                            f"[{status}] {message['agent_name']}: ${totals['cost_usd']}, "
                            f"{totals['tokens_total']} tokens, step {totals['current_step']}"
                        )
                    elif kind == "token":
                        print(message["text"], end="", flush=True)
                    elif kind in ("step", "status"):
                        last_seq = message["seq"]
                        status = message["status"]
                        data = message["data"]
                        if kind == "status":
                            print(
                                f"\n#{last_seq} {data['from_status'] or '-'} -> "
                                f"{data['to_status']} ({data['reason']})"
                            )
                        else:
                            tool = f" {data['tool_name']}" if data["tool_name"] else ""
                            failed = " FAILED: " + data["error"] if data["failed"] else ""
                            print(
                                f"\n#{last_seq} {data['step_type']}{tool}{failed}: "
                                f"{data['text'] or json.dumps(data['tool_output'])[:200]}"
                            )
                    # Ended: its last state change is here, or a snapshot says nothing follows.
                    ended = status in TERMINAL
                    if ended and (kind == "status" or message.get("seq", 0) <= last_seq):
                        return 0
        except InvalidStatus as refused:
            print(f"refused: HTTP {refused.response.status_code}", file=sys.stderr)
            return 1
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
            if code in FINAL_CLOSE_CODES:
                reason = f" ({closed.rcvd.reason})" if closed.rcvd and closed.rcvd.reason else ""
                print(f"closed: {FINAL_CLOSE_CODES[code]}{reason}", file=sys.stderr)
                return 1
            print(f"\n(connection lost, resuming after #{last_seq})", file=sys.stderr)
            time.sleep(1)
        except OSError as error:
            print(f"\n(cannot connect: {error}; retrying)", file=sys.stderr)
            time.sleep(2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
