"""The FastMCP proxy under test: `fastmcp.server.create_proxy` in front of one upstream.

Run: `python -m bench.fastmcp_proxy (--command CMD [ARG ...] | --url URL) [--http HOST:PORT]`
(stdio front by default). The upstream target is what `create_proxy` accepts: an `mcpServers`
dict for a stdio command (FastMCP's own stdio transport, keep-alive on by default) or a URL.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def target(args: argparse.Namespace) -> Any:
    if args.url:
        return args.url
    command, *rest = args.command
    return {"mcpServers": {"up": {"command": command, "args": rest}}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--http", metavar="HOST:PORT")
    parser.add_argument("--command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if not args.url and not args.command:
        parser.error("give --url or --command")

    from fastmcp.server import create_proxy

    proxy = create_proxy(target(args), name="fastmcp-proxy")
    if args.http:
        host, _, port = args.http.rpartition(":")
        proxy.run(transport="http", host=host, port=int(port), show_banner=False, log_level="warning")
    else:
        proxy.run(transport="stdio", show_banner=False, log_level="warning")
    sys.exit(0)


if __name__ == "__main__":
    main()
