"""elicitgate: an MCP gateway that makes elicitation work everywhere."""

__version__ = "0.1.0"
