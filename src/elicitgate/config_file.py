"""A configuration file read and parsed, not yet validated: the standard library only (YAML's parser when the file
is YAML), so that `serve` can read it before it imports pydantic (`upstreams.prespawn.start_early`). The
`config` package validates what this returns (`config.loading`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from elicitgate.client_files import parse_jsonc
from elicitgate.config_error import ConfigError
from elicitgate.json_shapes import JsonObject, is_object


def read_config_file(path: str | Path) -> JsonObject:
    """The file at `path`, parsed (`parse_config_text`); a file that cannot be read is a `ConfigError`."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, ["file not found"]) from None
    except OSError as exc:
        raise ConfigError(source, [f"cannot read: {exc.strerror}"]) from None
    return parse_config_text(text, source)


def parse_config_text(text: str, source: str) -> JsonObject:
    """YAML for `.yaml` / `.yml`, else JSON with comments and trailing commas (JSONC, as Cursor and
    VS Code write it)."""
    data: Any
    try:
        if Path(source).suffix.lower() in (".yaml", ".yml"):
            import yaml  # a JSON config (the usual kind) never needs it

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ConfigError(source, [f"not valid YAML: {exc}"]) from None
        else:
            data = parse_jsonc(text)
    except ValueError as exc:
        where = re.match(r"<string>:(\d+) (.*) at column (\d+)$", str(exc))
        detail = f"{where[2]} at line {where[1]}, column {where[3]}" if where else str(exc)
        raise ConfigError(source, [f"not valid JSON: {detail}"]) from None
    if data is None:
        data = {}
    if not is_object(data):
        raise ConfigError(source, [f"the top level must be an object, not {type(data).__name__}"])
    return data
