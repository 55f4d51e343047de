"""The `_meta` keys the gateway adds to the requests it presents (`io.elicitgate/...`)."""

SERVER_META_KEY = "io.elicitgate/server"
"""The upstream server that asks."""
SOURCE_META_KEY = "io.elicitgate/source"
REASON_META_KEY = "io.elicitgate/reason"
"""On the gateway's own questions: `source` is `gateway`, `reason` says why it asks."""
ERRORS_META_KEY = "io.elicitgate/previousErrors"
"""On a repeated question: what was wrong with the previous answer (property, rule, message)."""
