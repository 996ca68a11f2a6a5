"""The HTTP routes: thin shells over :class:`~tabsafe.service.builder.Builder` and the store."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Request
from fastapi import Query as Param
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response

from tabsafe.errors import TabsafeError, TooLargeError
from tabsafe.service.answers import Answer
from tabsafe.service.builder import Builder, Outcome, Refusal
from tabsafe.service.defence import Defence, RecordDamaged, Refused
from tabsafe.service.deps import AnswersDep, BuilderDep, DefenceDep, KeyDep, QueryKeyDep, ServiceError, StoreDep
from tabsafe.service.query import Query
from tabsafe.service.recorder import RecorderUnavailable, RemoteDefence
from tabsafe.service.schemas import Catalogue, ErrorResponse, Health, TableRequest, TableResponse

TABLES = "/api/v1/tables"
#: candidate tables tried for the suggestion of a differencing refusal
DIFFERENCING_TRIES = 8

router = APIRouter(prefix="/api/v1")


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": ErrorResponse} for c in codes}


@router.get("/health", response_model=Health, tags=["service"])
def health() -> dict[str, str]:
    """The service is up."""
    return {"status": "ok"}


@router.get("/catalogue", response_model=Catalogue, responses=_errors(401, 403), tags=["tables"])
def catalogue(key: KeyDep, builder: BuilderDep) -> dict[str, Any]:
    """Variables (codes, labels, hierarchy levels), numeric variables, the geography whose codes
    are the building blocks of areas, and the release rules."""
    return catalogue_of(builder)


@router.post(
    "/tables",
    response_model=TableResponse,
    responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}}},
               **_errors(401, 403, 409, 413, 422, 429, 503)},
    tags=["tables"],
)
async def table(request: Request, body: TableRequest, key: QueryKeyDep, builder: BuilderDep, store: StoreDep,
          answers: AnswersDep, defence: DefenceDep,
          format: Literal["json", "csv"] = Param("json", description="json, or csv to download")) -> Response:
    """A protected table: every cell, margins included, protected by the configured methods
    (the cell key method by default) — or, when a release rule refuses it, which rule, by how
    much, and the nearest table that passes as a ready-to-send query (409)."""
    raw = body.model_dump(exclude_none=True)
    request.state.query = raw
    cache_key = answers.key(raw, format)
    answer = answers.get(cache_key)
    if answer is None:
        if builder.inline:
            # on the event loop, not in a thread: counting prepared records and protecting hold
            # the GIL, so threads only took turns with it, and the hand-overs cost a quarter of
            # the service's CPU (measured under load: 3.4 against 2.5 ms per query). Limits bound
            # one answer's time (cells, suggestion tries); worker processes answer side by side.
            answer = compute(builder, raw, format)
        else:  # an engine's query waits on the engine: other requests go on meanwhile
            answer = await run_in_threadpool(compute, builder, raw, format)
        answers.put(cache_key, answer)
    audited = False
    if answer.status == 200:
        shared = answer

        def audit_in(db: Any, refused: Refused | None) -> None:
            # the audit row in the defence's write transaction: one commit for both
            nonlocal audited
            store.audit(key=key, endpoint=TABLES, db=db, **_audit_fields(shared, refused))
            audited = True

        # answers are shared by every key; whether this key may have this one now is decided
        # each time, against every population answered so far (tabsafe.service.defence)
        try:
            refused = await defence.admit_async(key.id if key is not None else None, answer.query, audit_in)
            if refused is not None:
                answer = defended(builder, defence, answer, refused)
        except (RecorderUnavailable, RecordDamaged):
            # no table whose population cannot be checked leaves the service
            raise ServiceError(503, "unavailable", "the differencing record is not available; try again later",
                               headers={"Retry-After": "10"}) from None
    if not audited:
        store.audit(key=key, endpoint=TABLES, query=answer.query, status=answer.status, outcome=answer.outcome,
                    cells=answer.cells, rules=answer.rules, reason=answer.reason)
    return Response(answer.body, status_code=answer.status, media_type=answer.media_type, headers=answer.headers)


def defended(builder: Builder, defence: Defence | RemoteDefence, answer: Answer, refused: Refused) -> Answer:
    """The refusal of a table the release rules pass but the differencing record does not, with
    the nearest table that passes both (when the refusal is about differencing)."""
    suggestion = None
    if refused.rule == "differencing":
        # each candidate is checked against the record too: a short search (an intruder's
        # refused carriers would otherwise each buy a long one)
        suggestion, _ = builder.suggest(Query.from_json(answer.query), tries=DIFFERENCING_TRIES,
                                        accept=lambda q: defence.would_admit(q.to_json()))
    check = _defence_check(refused)
    body = _error_body("refused", f"rule {refused.rule!r}: {refused.message}", rule=refused.rule,
                       violations=[check], **_suggestion(suggestion))
    return Answer(409, body, "application/json", {}, "refused", answer.cells, [*(answer.rules or []), check],
                  refused.rule, answer.query)


def _defence_check(refused: Refused) -> dict[str, Any]:
    return {"rule": refused.rule, "passed": False, "message": refused.message}


def _audit_fields(answer: Answer, refused: Refused | None) -> dict[str, Any]:
    """What the audit log records of an answer let out, or refused by the defence (as
    :func:`defended` answers it)."""
    if refused is None:
        return {"query": answer.query, "status": answer.status, "outcome": answer.outcome, "cells": answer.cells,
                "rules": answer.rules, "reason": answer.reason}
    return {"query": answer.query, "status": 409, "outcome": "refused", "cells": answer.cells,
            "rules": [*(answer.rules or []), _defence_check(refused)], "reason": refused.rule}


def _error_body(kind: str, message: str, **extra: Any) -> bytes:
    return json.dumps({"error": {"type": kind, "message": message, **extra}}).encode()


def compute(builder: Builder, raw: dict[str, Any], fmt: str) -> Answer:
    """The answer to a query as sent: the protected table, a refusal with the rule and a table
    that passes, or why the query is invalid or too large (with a table that passes, if one is
    near)."""
    query = Query.from_json(raw)
    try:
        result = builder.answer(query)
    except TabsafeError as exc:
        status = 413 if isinstance(exc, TooLargeError) else 422
        kind = "too-large" if status == 413 else "invalid"
        suggestion, _ = builder.suggest(query)
        message = exc.render()
        return Answer(status, _error_body(kind, message, **_suggestion(suggestion)), "application/json", {},
                      kind, None, None, message[:500], raw)
    if isinstance(result, Refusal):
        out = result.outcome
        first = out.failed[0]
        shown = first.to_json()
        body = _error_body("refused", f"rule {first.rule!r}: {first.message}", rule=first.rule, limit=first.limit,
                           **{k: shown[k] for k in ("value", "by") if k in shown},
                           violations=[c.to_json() for c in out.failed], **_suggestion(result.suggestion))
        return Answer(409, body, "application/json", {}, "refused", out.cells,
                      [c.to_json(private=True) for c in out.checks], first.rule, out.query.to_json())
    media, text, headers = table_response(result, fmt)
    return Answer(200, text, media, headers, "answered", result.cells, [c.to_json() for c in result.checks], None,
                  result.query.to_json())


def _suggestion(s: Any) -> dict[str, Any]:
    if s is None:
        return {}
    return {"suggestion": s.query.to_json(), "changes": list(s.changes)}


def table_response(outcome: Outcome, fmt: str) -> tuple[str, bytes, dict[str, str]]:
    """Media type, body and headers of a protected table, from its release payload."""
    payload = outcome.payload
    assert payload is not None
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(payload["columns"])
        w.writerows(["" if v is None else v for v in row] for row in payload["rows"])
        names = "_".join(d.variable for d in outcome.query.dimensions)
        return "text/csv", buf.getvalue().encode(), {"Content-Disposition": f'attachment; filename="table_{names}.csv"'}
    body = {"query": outcome.query.to_json(), **{k: payload[k] for k in ("dimensions", "columns", "rows")},
            "rules": [c.to_json() for c in outcome.checks], "methods": payload["methods"], "notes": payload["notes"]}
    return "application/json", orjson.dumps(body), {}


def catalogue_of(builder: Builder) -> dict[str, Any]:
    cached = getattr(builder, "_catalogue", None)
    if cached is not None:
        return cached
    data = builder.data
    variables = []
    for v in data.variables.values():
        h = v.hierarchy
        variables.append({
            "name": v.name,
            "levels": [{"level": i, "name": n, "categories": len(v.at_level(i))}
                       for i, n in enumerate(v.levels, start=1)],
            "default_level": h.max_depth,
            "recode_level": v.recode_level,
            "codes": [{"code": c, "label": v.label(c), "level": h.depth(c),
                       "parent": None if h.parents[c] == h.total else h.parents[c]} for c in h.order[1:]],
        })
    out = {
        "variables": variables,
        "numeric": [{"name": n.name, "label": n.label} for n in data.numeric.values()],
        "geography": data.geography,
        "measures": ["count", "sum", "mean"],
        "rules": builder.rules.model_dump(),
        "records": "persons",
    }
    builder._catalogue = out  # type: ignore[attr-defined]
    return out


web = APIRouter()
_PAGE = Path(__file__).parent / "web" / "index.html"


@web.get("/", include_in_schema=False)
def page() -> HTMLResponse:
    """The table builder page (one file; no network beyond this service)."""
    return HTMLResponse(_PAGE.read_text(encoding="utf-8"), headers={
        "Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline' 'self'; "
                                   "style-src 'unsafe-inline' 'self'; img-src 'self' data:; connect-src 'self'"})
