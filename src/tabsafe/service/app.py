"""The application factory: settings in, a FastAPI app out (routes, error bodies, audit of
every query, a body-size guard)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tabsafe.errors import TabsafeError, TooLargeError
from tabsafe.service.answers import AnswerCache, fingerprint
from tabsafe.service.defence import Defence
from tabsafe.service.deps import ServiceError
from tabsafe.service.recorder import RemoteDefence
from tabsafe.service.routes import TABLES, router, web
from tabsafe.service.settings import Settings, build
from tabsafe.service.store import Store

log = logging.getLogger("tabsafe.service")
ENV = "TABSAFE_SERVICE_SETTINGS"


def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None,
           **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status_code=status, headers=headers)


def _audit(request: Request, status: int, kind: str, message: str, query: Any = None) -> None:
    """Every request to the table endpoint leaves one audit row, refused or failed ones too."""
    if request.url.path != TABLES or request.method != "POST":
        return
    store: Store = request.app.state.store
    key = getattr(request.state, "key", None)
    q = getattr(request.state, "query", None) if query is None else query
    store.audit(key=key, endpoint=TABLES, query=q, status=status, outcome=kind, reason=message[:500])


#: headers of every response: no framing by other sites (clickjacking), no type sniffing, no
#: referrer leaving the service
SECURITY_HEADERS = [(b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer")]
FRAME_ANCESTORS = b"frame-ancestors 'none'"


class BodyLimit:
    """Refuse request bodies over the limit on the bytes actually read — announced by
    Content-Length or sent chunked — before the app sees any (413; the rest is never read), and
    give every response the security headers (pure ASGI: no overhead)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _secured(send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._too_large(scope, receive, send)
            return
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            body, more = bytearray(), True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.limit:
                    await self._too_large(scope, receive, send)
                    return
            replayed = False

            async def replay() -> Any:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": bytes(body), "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)

    async def _too_large(self, scope: Any, receive: Any, send: Any) -> None:
        # the connection is closed after the answer: what is left of the body is never read
        response = _error(413, "too-large", f"a request body has at most {self.limit:,} bytes",
                          headers={"Connection": "close"})
        await response(scope, receive, send)


def _secured(send: Any) -> Any:
    async def wrapped(message: Any) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-frame-options"]
            csp = [v for k, v in headers if k.lower() == b"content-security-policy"]
            headers = [(k, v) for k, v in headers if k.lower() != b"content-security-policy"]
            policy = (csp[0] + b"; " if csp else b"") + FRAME_ANCESTORS
            message = {**message, "headers": [*headers, *SECURITY_HEADERS, (b"content-security-policy", policy)]}
        await send(message)
    return wrapped


def create_app(settings: Settings, *, data: Any = None, recorder: str | None = None) -> FastAPI:
    """The service for ``settings`` (prepares the data on first start, unless an engine counts
    the records: ``engine`` in the settings, :mod:`tabsafe.service.planned`). ``recorder``: the
    socket of the process that keeps the differencing record for every worker
    (:mod:`tabsafe.service.recorder`); without it the app keeps its own."""
    from tabsafe.service.planned import make_builder, open_data

    os.umask(0o077)  # every file the service writes (store, answers, kept cubes) is its owner's only
    data = data or open_data(settings)
    app = FastAPI(
        title="tabsafe table builder",
        version="1",
        description="User-defined tables from microdata the user never sees; every table is protected "
                    "(the cell key method by default) before it leaves the service.",
        debug=settings.debug,
        docs_url="/docs" if settings.environment == "development" else None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.builder = make_builder(settings, data)
    # ready before the first request: uvicorn accepts connections once the app is made
    app.state.builder.warm()
    app.state.store = Store(settings.store_path, key_path=settings.audit_key_path)
    app.state.defence = Defence(settings, data, app.state.store) if recorder is None else \
        RemoteDefence(recorder, app.state.store, settings, data)
    app.state.answers = AnswerCache(settings.prepared_path / "answers.sqlite", fingerprint(settings, data.fingerprint),
                                    settings.limits.answers_kept)

    _add_error_handlers(app)
    app.include_router(router)
    app.include_router(web)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.add_middleware(BodyLimit, limit=settings.limits.max_body_bytes)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error as one JSON body ``{"error": {"type", "message", …}}`` with its status: the
    service's refusals, tabsafe's errors (4xx, 413 for a table too large; with a query the
    builder can answer instead when it has one), invalid requests (422, the first problem with its
    place), unknown routes, and anything else as a logged 500 that shows nothing of it. Requests
    to the table endpoint are audited (:func:`_audit`)."""

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        if exc.status != 409:  # refusals are audited by the route with their rules
            _audit(request, exc.status, exc.kind, exc.message)
        return _error(exc.status, exc.kind, exc.message, exc.headers, **exc.extra)

    @app.exception_handler(TabsafeError)
    async def tabsafe_error(request: Request, exc: TabsafeError) -> JSONResponse:
        status = 413 if isinstance(exc, TooLargeError) else exc.http_status if exc.http_status < 500 else 422
        kind = "too-large" if status == 413 else "refused" if status == 409 else "invalid"
        message = exc.render()
        suggestion: dict[str, Any] = {}
        query = getattr(request.state, "query", None)
        if query is not None and request.url.path == TABLES:
            from tabsafe.service.query import Query

            try:
                s, _ = request.app.state.builder.suggest(Query.from_json(query))
            except TabsafeError:
                s = None
            if s is not None:
                suggestion = {"suggestion": s.query.to_json(), "changes": list(s.changes)}
        _audit(request, status, kind, message)
        return _error(status, kind, message, **suggestion)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        message = f"{where}: {first.get('msg')}" if where else str(first.get("msg"))
        body = getattr(exc, "body", None)
        try:
            raw = body if isinstance(body, (dict, list)) else (body.decode("utf-8", "replace") if isinstance(
                body, bytes) else None)
        except Exception:  # pragma: no cover - a body we cannot show is not recorded
            raw = None
        _audit(request, 422, "invalid", message, query=json.dumps(raw) if isinstance(raw, (dict, list)) else raw)
        return _error(422, "invalid", " ".join(message.split()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not-found" if exc.status_code in (404, 405) else "invalid"
        return _error(exc.status_code, kind, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:  # pragma: no cover - a bug
        log.exception("internal error")
        _audit(request, 500, "internal", type(exc).__name__)
        return _error(500, "internal", "internal error (logged)")


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI schema, with the served data set's variable names as enums (a client and a
    fuzzer see which variables exist; codes are in the catalogue)."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        data = app.state.builder.data
        parts = schema.get("components", {}).get("schemas", {})
        if "DimensionIn" in parts:
            parts["DimensionIn"]["properties"]["variable"]["enum"] = list(data.variables)
        if "TableRequest" in parts and data.numeric:
            prop = parts["TableRequest"]["properties"]["variable"]
            prop["anyOf"] = [{"type": "string", "enum": list(data.numeric)}, {"type": "null"}]
        app.openapi_schema = schema
    return app.openapi_schema


def app_from_environment() -> FastAPI:
    """The app of the settings in ``$TABSAFE_SERVICE_SETTINGS`` (for uvicorn's worker
    processes)."""
    values = json.loads(os.environ[ENV])
    return create_app(build(values))
