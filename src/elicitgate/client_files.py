"""The config files desktop clients already have, taken as they are.

Claude Desktop, Cursor and VS Code each keep their servers in a JSON file with their own habits:
comments and trailing commas (JSONC), VS Code's `servers` / `inputs` layout, `${VAR}` placeholders
the client fills from the environment, and settings of the app itself next to the servers. This
module turns such a file into the gateway's own shape, or says exactly what to change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from elicitgate.json_shapes import JsonObject, is_array, is_object

VSCODE_INPUTS_KEY = "inputs"
"""VS Code's prompts for `${input:ID}`; the gateway reads those values from the environment instead."""

_PLACEHOLDER = re.compile(r"\$\{(?:(env|input):)?([^}:]+)(?::-([^}]*))?\}")


def parse_jsonc(text: str) -> Any:
    """JSON with comments and trailing commas (JSON5, a superset): what Cursor and VS Code write."""
    try:
        return json.loads(text)  # the usual file: the same value json5 reads, without json5 (and unicodedata) at all
    except ValueError:
        import json5

        return json5.loads(text)


def input_variable(input_id: str) -> str:
    """The environment variable that answers VS Code's `${input:ID}`: ID in upper case, other
    characters as `_` (`github-token` -> `GITHUB_TOKEN`)."""
    return re.sub(r"[^A-Za-z0-9]", "_", input_id).upper()


def close_match(word: str, choices: list[str]) -> str | None:
    import difflib  # only for a mistyped key (~0.3 MiB)

    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.75)
    return found[0] if found else None


def adapt(
    data: JsonObject, own_keys: list[str], warn: Callable[[str], None]
) -> tuple[JsonObject, list[str]]:
    """The file as the gateway reads it, and the problems that stop it (key path: what to do).

    VS Code's `servers` becomes `mcpServers`; top-level keys that are neither the gateway's nor a
    near miss of one (a desktop app's own settings such as `globalShortcut`) are dropped with one
    warning; a near miss stays, so validation reports it.
    """
    data = dict(data)
    problems: list[str] = []
    if "servers" in data and "mcpServers" not in data and isinstance(data["servers"], dict):
        data["mcpServers"] = data.pop("servers")  # VS Code's .vscode/mcp.json
        data.pop(VSCODE_INPUTS_KEY, None)
    foreign = [key for key in data if key not in own_keys and not close_match(key, own_keys)]
    if foreign:
        warn(f"ignoring top-level keys that are not elicitgate's (a desktop app's own settings?): {', '.join(foreign)}")
        for key in foreign:
            del data[key]
    servers = data.get("mcpServers")
    if is_object(servers):
        for name, entry in servers.items():
            if is_object(entry) and "command" in entry and "url" in entry:
                problems.append(
                    f"mcpServers.{name}: use either command (a stdio server the gateway starts) or url "
                    "(an HTTP server already running), not both"
                )
    return data, problems


def expand_placeholders(servers: Any, environ: Mapping[str, str]) -> tuple[Any, list[str]]:
    """`${VAR}`, `${env:VAR}`, `${VAR:-default}` and VS Code's `${input:ID}` in every string of the
    server entries, filled from the environment as desktop clients do; unset ones are problems."""
    problems: list[str] = []

    def fill(value: Any, path: str) -> Any:
        if isinstance(value, str):
            return _PLACEHOLDER.sub(lambda m: replace(m, path), value)
        if is_array(value):
            return [fill(item, f"{path}[{i}]") for i, item in enumerate(value)]
        if is_object(value):
            return {key: fill(item, f"{path}.{key}") for key, item in value.items()}
        return value

    def replace(match: re.Match[str], path: str) -> str:
        kind, name, default = match.groups()
        variable = input_variable(name) if kind == "input" else name
        if variable in environ:
            return environ[variable]
        if default is not None:
            return default
        if kind == "input":
            problems.append(
                f"{path}: {match[0]} is a VS Code prompt, which the gateway cannot show: set the "
                f"environment variable {variable}"
            )
        else:
            problems.append(f"{path}: {match[0]} is not set in the environment (set {variable}, or write the value)")
        return match[0]

    if not is_object(servers):
        return servers, problems
    return {name: fill(entry, f"mcpServers.{name}") for name, entry in servers.items()}, problems
