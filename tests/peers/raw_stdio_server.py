"""An MCP server over stdio with no SDK under it, for requests no SDK would send (`_meta: "x"`).

Run: `python -m tests.peers.raw_stdio_server`. Handshake era only. One tool:
- `ask {params}` -> sends `elicitation/create` with exactly `params`, and returns what came back (the
  result, or `{"error": ...}`) as JSON text.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer_of(request_id: Any) -> dict[str, Any]:
    """The response to our request `request_id` (the gateway sends nothing else meanwhile that needs one)."""
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return message
    raise SystemExit(0)


def main() -> None:
    asked = 0
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or method is None:
            continue
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": message["params"]["protocolVersion"],
                                      "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            asked += 1
            send({"jsonrpc": "2.0", "id": f"raw-{asked}", "method": "elicitation/create",
                  "params": message["params"]["arguments"]["params"]})
            got = answer_of(f"raw-{asked}")
            shown = got.get("result", {"error": got.get("error")})
            result = {"content": [{"type": "text", "text": json.dumps(shown)}]}
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
