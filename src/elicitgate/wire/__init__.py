"""How messages travel, for the faces and the upstreams alike (httpx's `_transports/` is the model).

- `base`: `MessageWire`, what every wire is to the endpoint (`PushWire`, one that hands each message over as it
  is read), and `Inbound`, one message read.
- `endpoint`: one JSON-RPC connection as plain dicts (`Endpoint`): requests matched to responses, the
  peer's requests and notifications handed to a handler.
- `framing`: bytes to messages (one per line on stdio, one per body or event on HTTP).
- `codec`: JSON to and from bytes (orjson, the standard library where orjson would change a message).
- `stdio`: the wires on pipes (`PipeWire` with its `LineReader`: the stdio face's own and a `Popen`-started
  server's; `StdioWire` on a process the SDK spawned).
- `scopes`: the hot path's cancel scope and clock, without anyio's look-up of the running library.
- `http`: streamable HTTP to one upstream (`HttpWire`), on `http_client`, the gateway's HTTP/1.1 client on
  asyncio Protocols and httptools; `sse`: the event-stream parser.
- `memory`: two connected wires in memory, for unit tests of the core.
- `sdk_streams`: the `mcp` SDK's transports (memory streams of `SessionMessage`) as a `MessageWire`.

Nothing is imported here, so that a face loads only the wires it uses.
"""
