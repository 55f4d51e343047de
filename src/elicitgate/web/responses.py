"""What every response of the web surface carries: the security headers, and the shape of an error."""

from __future__ import annotations

from starlette.responses import JSONResponse, Response

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; frame-src 'self'"
)
UI_CSP = (
    # MCP Apps' restrictive default for a `ui://` resource, and a sandbox even when opened on its own.
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "media-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'; frame-src 'none'; "
    "sandbox allow-scripts"
)


def nosniff(response: Response, cache: str = "no-store") -> Response:
    """Every response: its type is what it says (no MIME sniffing), and how long it may be cached."""
    response.headers["Cache-Control"] = cache
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def secure(response: Response, csp: str = PAGE_CSP) -> Response:
    """A page or an API answer: never cached, never framed by another site, no referrer leaves it."""
    nosniff(response)
    response.headers["Content-Security-Policy"] = csp
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
    return response


def problem(status: int, error: str, **extra: object) -> Response:
    """An error of the admin API and the pages' scripts: `{"error": ..., **extra}` with its status."""
    return secure(JSONResponse({"error": error, **extra}, status_code=status))
