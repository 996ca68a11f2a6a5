"""Dependencies of the routes, as ``Annotated`` aliases (full-stack-fastapi-template's
``api/deps.py``): the settings, the builder, the store, and the API key of the request — checked
(401 missing or unknown, 403 revoked) and, for queries, within its rate and quota (429).

They are ``async``: each is a look-up of well under a millisecond (an indexed SQLite read), cheaper
on the event loop than a hop to the thread pool."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader

from tabsafe.service.answers import AnswerCache
from tabsafe.service.builder import Builder
from tabsafe.service.defence import Defence
from tabsafe.service.recorder import RemoteDefence
from tabsafe.service.settings import Settings
from tabsafe.service.store import Key, Store


class ServiceError(Exception):
    """An HTTP error with the service's error body (see ``schemas.ErrorDetail``)."""

    def __init__(self, status: int, kind: str, message: str, *, headers: dict[str, str] | None = None,
                 extra: dict | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.headers = headers or {}
        self.extra = extra or {}


api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="an API key from `tabsafe keys-admin`")


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_builder(request: Request) -> Builder:
    return request.app.state.builder


async def get_store(request: Request) -> Store:
    return request.app.state.store


async def get_answers(request: Request) -> AnswerCache:
    return request.app.state.answers


async def get_defence(request: Request) -> Defence | RemoteDefence:
    return request.app.state.defence


SettingsDep = Annotated[Settings, Depends(get_settings)]
AnswersDep = Annotated[AnswerCache, Depends(get_answers)]
DefenceDep = Annotated[Defence | RemoteDefence, Depends(get_defence)]
BuilderDep = Annotated[Builder, Depends(get_builder)]
StoreDep = Annotated[Store, Depends(get_store)]


async def current_key(request: Request, settings: SettingsDep, store: StoreDep,
                presented: Annotated[str | None, Security(api_key_header)]) -> Key | None:
    """The request's key; None when the settings switch auth off (loopback only)."""
    if not settings.auth:
        return None
    if not presented:
        raise ServiceError(401, "unauthorized", "an API key is needed: send it in the X-API-Key header",
                           headers={"WWW-Authenticate": "X-API-Key"})
    state, key = store.check(presented)
    if state == "unknown":
        raise ServiceError(401, "unauthorized", "the API key is not valid", headers={"WWW-Authenticate": "X-API-Key"})
    request.state.key = key
    if state == "revoked":
        raise ServiceError(403, "forbidden", "the API key was revoked")
    return key


KeyDep = Annotated[Key | None, Depends(current_key)]


async def query_key(key: KeyDep, settings: SettingsDep, store: StoreDep) -> Key | None:
    """The key of a query, within its rate (per minute) and quota (per UTC day)."""
    if key is None:
        return None
    rate = key.rate_per_minute or settings.limits.rate_per_minute
    quota = key.quota_per_day or settings.limits.quota_per_day
    # checked and counted at once, so processes answering side by side never both take the last
    # query of a minute (counting when the audit row was written let 31 through a rate of 30)
    state, wait = store.reserve(key.id, rate, quota)
    if state == "quota":
        raise ServiceError(429, "quota", f"the key's quota of {quota:,} queries a day is used up",
                           headers={"Retry-After": "3600"})
    if state == "rate-limited":
        raise ServiceError(429, "rate-limited", f"at most {rate:,} queries a minute per key; try again in "
                           f"{wait:.0f} s", headers={"Retry-After": str(max(1, round(wait)))})
    return key


QueryKeyDep = Annotated[Key | None, Depends(query_key)]
