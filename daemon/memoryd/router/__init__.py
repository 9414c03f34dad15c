"""Self-enhancement router (HGP §3.1): classifier head and routing decisions."""

from memoryd.router.head import RouterHead
from memoryd.router.router import RouteDecision, Router

__all__ = ["RouteDecision", "Router", "RouterHead"]
