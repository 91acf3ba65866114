"""Every REST route KServe's app registers, for the surface tests (tests/integration/
test_oip_surface.py): run by the OIP venv's Python (KServe)."""

from __future__ import annotations

from typing import Any


def kserve_routes() -> list[tuple[str, str]]:
    """(method, path template) of every route KServe 0.21's REST app registers (its root and
    /metrics, v1, v2 with the model repository, FastAPI's docs): the surface oip.middleware's
    `ROUTES` narrows to the protocol's."""
    from unittest import mock

    from fastapi import FastAPI
    from kserve.protocol.rest.v1_endpoints import register_v1_endpoints
    from kserve.protocol.rest.v2_endpoints import register_v2_endpoints

    app = FastAPI()
    plane, repository = mock.MagicMock(), mock.MagicMock()
    register_v1_endpoints(app, plane, repository)
    register_v2_endpoints(app, plane, repository)
    found = {("GET", "/"), ("GET", "/metrics")}

    def walk(routes: Any, prefix: str) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None)  # FastAPI's included router
            if inner is not None:
                context = getattr(route, "include_context", None)
                walk(inner.routes, prefix + str(getattr(context, "prefix", "") or ""))
                continue
            for method in sorted(getattr(route, "methods", None) or ()):
                found.add((method, prefix + getattr(route, "path", "")))

    walk(app.routes, "")
    return sorted(found)
