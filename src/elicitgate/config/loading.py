"""From a file and the environment to a `GatewayConfig`, or to a `ConfigError` naming each key (or
`ELICITGATE_*` variable) that is wrong and why."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from elicitgate.client_files import adapt, close_match, expand_placeholders
from elicitgate.config.servers import HttpServer, StdioServer
from elicitgate.config.settings import ENV_PREFIX, GatewayConfig
from elicitgate.config_error import ConfigError
from elicitgate.config_file import parse_config_text as parse_config_text  # re-exported: `config`'s surface
from elicitgate.config_file import read_config_file
from elicitgate.json_shapes import JsonObject


def _key_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if item in ("stdio", "http") and parts and parts[-2:-1] == ["mcpServers"]:
            continue  # discriminator tags are not keys the user wrote
        parts.append(str(item))
    return ".".join(parts) or "(top level)"


def _describe(error: ErrorDetails, environ: Mapping[str, str]) -> str:
    loc = tuple(error["loc"])
    variable = _environment_variable(loc, environ)
    if loc and loc[0] == "mcp_servers":
        loc = ("mcpServers", *loc[1:])
    path = f"{variable} (environment)" if variable else _key_path(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        hint = close_match(str(loc[-1]), _known_keys(tuple(error["loc"])[:-1]))
        return f"{path}: unknown key" + (f" (did you mean {hint}?)" if hint else "")
    if kind == "missing":
        return f"{path}: required key is missing"
    msg = error["msg"]
    if "input" in error and kind not in ("value_error",):
        return f"{path}: {msg} (got {error['input']!r})"
    return f"{path}: {msg}"


def _warn_to_log(message: str) -> None:
    logging.getLogger("elicitgate.config").warning("%s", message)


def build_config(
    data: JsonObject,
    source: str,
    warn: Callable[[str], None] = _warn_to_log,
    environ: Mapping[str, str] | None = None,
) -> GatewayConfig:
    """Validate a parsed file (a desktop client's as it is, see `client_files`) with the
    `ELICITGATE_*` environment on top; every failure is a `ConfigError` naming the key or variable."""
    environ = os.environ if environ is None else environ
    data, problems = adapt(data, _known_keys(()), warn)
    data["mcpServers"], unset = expand_placeholders(data.get("mcpServers", {}), environ)
    for message in _unknown_environment(environ):
        warn(message)
    if problems or unset:
        raise ConfigError(source, problems + unset)
    try:
        return GatewayConfig(**data)
    except ValidationError as exc:
        raise ConfigError(source, [_describe(e, environ) for e in exc.errors()]) from None
    except Exception as exc:  # pydantic-settings raises SettingsError for malformed env values
        field = re.search(r'field "([^"]+)"', str(exc))
        variable = _environment_variable((field[1],), environ) if field else None
        if variable:
            problem = f"{variable} (environment): not valid JSON (or set one key: {variable}__KEY=VALUE)"
            raise ConfigError(source, [problem]) from None
        raise ConfigError(f"{source} (with {ENV_PREFIX}* environment)", [str(exc)]) from None


def load_config(path: str | Path, warn: Callable[[str], None] = _warn_to_log) -> GatewayConfig:
    """Read, parse and validate a config file; every failure is a `ConfigError`, every warning
    (ignored keys, unknown `ELICITGATE_*` variables) goes to `warn`."""
    return build_config(read_config_file(path), str(path), warn)


# Which key a problem is about, and which ELICITGATE_* variable set it.


def _section_model(name: str) -> type[BaseModel] | None:
    field = GatewayConfig.model_fields.get(name)
    annotation = field.annotation if field else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model accepts where `loc` (a validation location) points."""
    if not loc:
        fields = GatewayConfig.model_fields
        return [*fields, *(f.alias for f in fields.values() if f.alias)]
    if loc[0] in ("mcp_servers", "mcpServers"):
        return sorted({*StdioServer.model_fields, *HttpServer.model_fields}) if len(loc) >= 2 else []
    section = _section_model(str(loc[0]))
    return list(section.model_fields) if section and len(loc) == 1 else []


def _environment_variable(loc: tuple[int | str, ...], environ: Mapping[str, str]) -> str | None:
    """The `ELICITGATE_*` variable that set the value at `loc` (or the section around it), if any."""
    names = {name.upper(): name for name in environ if name.upper().startswith(ENV_PREFIX)}
    keys = [str(part) for part in loc if part not in ("stdio", "http")]
    for end in range(len(keys), 0, -1):
        candidate = ENV_PREFIX + "__".join(keys[:end]).upper()
        if candidate in names:
            return names[candidate]
    return None


def _unknown_environment(environ: Mapping[str, str]) -> list[str]:
    """Warnings for `ELICITGATE_*` variables that name no setting (pydantic-settings ignores them)."""
    fields = list(GatewayConfig.model_fields)
    warnings: list[str] = []
    for name in environ:
        if not name.upper().startswith(ENV_PREFIX):
            continue
        top = name[len(ENV_PREFIX) :].split("__", 1)[0].lower()
        if top not in fields:
            hint = close_match(top, fields)
            guess = f" (did you mean {ENV_PREFIX}{hint.upper()}?)" if hint else ""
            warnings.append(f"the environment variable {name} is not a setting and is ignored{guess}")
    return warnings
