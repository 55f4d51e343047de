"""elicitgate: an MCP gateway that makes elicitation work everywhere."""

from elicitgate.sdk_packages import defer_sdk_package_inits

__version__ = "0.1.0"

defer_sdk_package_inits()  # before anything imports the SDK
