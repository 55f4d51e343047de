"""The gateway's configuration: the `mcpServers` file desktop clients use, plus our own sections.

One pydantic-settings model (`settings`), a module per section, and `loading`: a file (JSON or YAML) is
the base; `ELICITGATE_*` environment variables override it (nested keys with `__`, e.g.
`ELICITGATE_ELICITATION__DEFAULT_TIMEOUT=60`). Import every name from here: this is the package's surface.
"""

from __future__ import annotations

from elicitgate.config.audit import AuditConfig
from elicitgate.config.base import default_share
from elicitgate.config.bridging import BridgingConfig
from elicitgate.config.elicitation import ElicitationConfig, UrlPolicyConfig
from elicitgate.config.http import BearerToken, HttpAuthConfig, HttpFaceConfig, OAuthResourceConfig
from elicitgate.config.loading import build_config, load_config, parse_config_text
from elicitgate.config.notices import (
    HeadlessConfig,
    NotifyConfig,
    NotifyOverride,
    ToolQuestions,
    Unattended,
    apprise_sender,
)
from elicitgate.config.servers import (
    DEFAULT_MAX_EVENT_BYTES,
    HttpServer,
    NamespacingConfig,
    SessionPolicy,
    StdioServer,
    UpstreamConfig,
    UpstreamRetryConfig,
)
from elicitgate.config.settings import ENV_PREFIX, MIN_ADMIN_TOKEN_LENGTH, GatewayConfig
from elicitgate.config.tasks import TasksConfig

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "ENV_PREFIX",
    "MIN_ADMIN_TOKEN_LENGTH",
    "AuditConfig",
    "BearerToken",
    "BridgingConfig",
    "ElicitationConfig",
    "GatewayConfig",
    "HeadlessConfig",
    "HttpAuthConfig",
    "HttpFaceConfig",
    "HttpServer",
    "NamespacingConfig",
    "NotifyConfig",
    "NotifyOverride",
    "OAuthResourceConfig",
    "SessionPolicy",
    "StdioServer",
    "TasksConfig",
    "ToolQuestions",
    "Unattended",
    "UpstreamConfig",
    "UpstreamRetryConfig",
    "UrlPolicyConfig",
    "apprise_sender",
    "build_config",
    "default_share",
    "load_config",
    "parse_config_text",
]
