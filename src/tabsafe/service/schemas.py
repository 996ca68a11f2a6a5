"""Request and response bodies of the HTTP API, split by role (what a user sends, what a table
answer is, what an error is), so the OpenAPI schema documents each."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Code = str
Number = int | float


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupIn(_In):
    """One category of a recode: the union of the codes' records."""

    label: str = Field(min_length=1, max_length=100)
    codes: list[Code] = Field(min_length=1, max_length=10_000)


class DimensionIn(_In):
    """A spanning variable: a level of its hierarchy (optionally some categories only, optionally
    with subtotals) or a recode into groups."""

    variable: str = Field(min_length=1, max_length=100)
    level: int | None = Field(None, ge=1, le=50, description="hierarchy level, 1 = top; default the deepest")
    categories: list[Code] | None = Field(None, min_length=1, max_length=100_000,
                                          description="only these categories of the level")
    groups: list[GroupIn] | None = Field(None, min_length=1, max_length=10_000,
                                         description="a recode: groups of codes, instead of a level")
    subtotals: bool = False


class TableRequest(_In):
    """A user-defined table (a query)."""

    dimensions: list[DimensionIn] = Field(min_length=1, max_length=20)
    area: list[Code] | None = Field(None, min_length=1, max_length=100_000,
                                    description="a user-defined area: geography codes (building blocks) joined")
    where: str | None = Field(None, max_length=100_000, description="sub-population in tabsafe's filter language")
    measure: Literal["count", "sum", "mean"] = "count"
    variable: str | None = Field(None, max_length=100, description="the numeric variable of a sum or mean")


class RuleCheck(BaseModel):
    rule: str
    limit: Number | bool
    value: Number | bool
    passed: bool
    by: Number | None = None
    message: str | None = None


class DimensionOut(BaseModel):
    variable: str
    codes: list[Code]
    labels: dict[str, str]
    parents: dict[str, str]


class TableResponse(BaseModel):
    """A protected table: every cell of the grid, margins included, published values only."""

    query: TableRequest
    dimensions: list[DimensionOut]
    columns: list[str]
    rows: list[list[str | int | float | None]]
    rules: list[RuleCheck]
    methods: list[str]
    notes: list[str]


class ErrorDetail(BaseModel):
    type: Literal["invalid", "too-large", "refused", "unauthorized", "forbidden", "rate-limited", "quota",
                  "not-found", "internal"]
    message: str
    rule: str | None = None
    limit: Number | bool | None = None
    value: Number | bool | None = None
    by: Number | None = None
    violations: list[RuleCheck] = []
    suggestion: TableRequest | None = Field(None, description="the nearest table that passes: send it as it is")
    changes: list[str] = []


class ErrorResponse(BaseModel):
    error: ErrorDetail


class LevelOut(BaseModel):
    level: int
    name: str
    categories: int


class CodeOut(BaseModel):
    code: Code
    label: str
    level: int
    parent: Code | None


class VariableOut(BaseModel):
    name: str
    levels: list[LevelOut]
    default_level: int
    recode_level: int
    codes: list[CodeOut]


class NumericOut(BaseModel):
    name: str
    label: str


class Catalogue(BaseModel):
    variables: list[VariableOut]
    numeric: list[NumericOut]
    geography: str | None
    measures: list[str]
    rules: dict[str, Any]
    records: str = Field(description="what the tables count")


class Health(BaseModel):
    status: Literal["ok"]
