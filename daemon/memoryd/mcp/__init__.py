"""memoryd over MCP: the server inside the daemon (streamable HTTP at ``/mcp``).

:mod:`~memoryd.mcp.tools` holds the tools, :mod:`~memoryd.mcp.replies` what they answer,
:mod:`~memoryd.mcp.surface` the server with its resources, prompts and metrics, and
:mod:`~memoryd.mcp.endpoint` the ASGI endpoint that checks the token and binds the user.
"""

from memoryd.mcp.endpoint import McpEndpoint
from memoryd.mcp.surface import McpMetrics, McpSurface

__all__ = ["McpEndpoint", "McpMetrics", "McpSurface"]
