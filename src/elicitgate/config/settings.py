"""The whole configuration as one pydantic-settings model: every section, the top-level keys, and the
`ELICITGATE_*` environment over the file."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from elicitgate.config.audit import AuditConfig
from elicitgate.config.bridging import BridgingConfig
from elicitgate.config.elicitation import ElicitationConfig
from elicitgate.config.http import HttpFaceConfig
from elicitgate.config.servers import (
    HttpServer,
    NamespacingConfig,
    StdioServer,
    UpstreamConfig,
    UpstreamRetryConfig,
)
from elicitgate.config.tasks import TasksConfig
from elicitgate.json_shapes import JsonObject
from elicitgate.token_strength import GENERATE, weakness

ENV_PREFIX = "ELICITGATE_"
MIN_ADMIN_TOKEN_LENGTH = 16


class GatewayConfig(BaseSettings):
    """Everything `elicitgate serve` reads."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", populate_by_name=True
    )

    mcp_servers: dict[str, UpstreamConfig] = Field(default_factory=dict, alias="mcpServers")
    namespacing: NamespacingConfig = Field(default_factory=NamespacingConfig)
    elicitation: ElicitationConfig = Field(default_factory=ElicitationConfig)
    bridging: BridgingConfig = Field(default_factory=BridgingConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    http: HttpFaceConfig = Field(default_factory=HttpFaceConfig)
    upstream_retry: UpstreamRetryConfig = Field(default_factory=UpstreamRetryConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    log_format: Literal["text", "json"] = "text"
    """`json`: one JSON object per log line (docs/operations.md)."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    admin_token: SecretStr | None = None
    """Bearer token for the admin API and the inbox (`ELICITGATE_ADMIN_TOKEN`), at least
    `MIN_ADMIN_TOKEN_LENGTH` characters and 128 bits of estimated entropy (`token_strength`); unset or
    empty, both are off."""

    redis_url: SecretStr | None = None
    """`redis://[:PASSWORD@]HOST:PORT/DB` (or `rediss://`, `unix://`): replicas with the same config and this
    URL act as one gateway (`ELICITGATE_REDIS_URL`, docs/deploy.md). Unset: everything stays in the process."""

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: SecretStr | None) -> SecretStr | None:
        if url is None or not url.get_secret_value().strip():
            return None
        if not url.get_secret_value().startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return url

    @field_validator("admin_token")
    @classmethod
    def _admin_token(cls, token: SecretStr | None) -> SecretStr | None:
        if token is None or not token.get_secret_value().strip():
            return None  # empty means off, never "any token will do"
        if len(token.get_secret_value()) < MIN_ADMIN_TOKEN_LENGTH:
            raise ValueError(
                f"the admin token must be at least {MIN_ADMIN_TOKEN_LENGTH} characters "
                f"(e.g. `{GENERATE}`), or empty to turn the admin API and the inbox off"
            )
        if (why := weakness(token.get_secret_value())) is not None:
            raise ValueError(f"the admin token {why} (or set it empty to turn the admin API and the inbox off)")
        return token

    @field_validator("mcp_servers")
    @classmethod
    def _names(cls, servers: JsonObject) -> JsonObject:
        for name in servers:
            if not name or any(ch.isspace() for ch in name):
                raise ValueError(f"server name {name!r} must be non-empty and contain no whitespace")
        return servers

    @model_validator(mode="after")
    def _separator_not_in_names(self) -> GatewayConfig:
        sep = self.namespacing.separator
        for name in self.mcp_servers:
            if sep in name:
                raise ValueError(f"server name {name!r} contains the namespace separator {sep!r}")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment wins over the file, which arrives as init kwargs.
        return (env_settings, init_settings)

    @field_validator("bridging")
    @classmethod
    def _key_lengths(cls, bridging: BridgingConfig) -> BridgingConfig:
        for i, key in enumerate(bridging.state_keys):
            if len(key.get_secret_value().encode()) < 32:
                raise ValueError(f"state_keys[{i}] must be at least 32 bytes of secret randomness")
        return bridging

    def upstreams(self) -> dict[str, StdioServer | HttpServer]:
        return {name: cfg for name, cfg in self.mcp_servers.items() if cfg.enabled}
