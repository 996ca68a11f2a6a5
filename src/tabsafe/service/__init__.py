"""The table builder service (issue #17): users define tables from microdata they never see;
every table is protected before it leaves the process.

* :mod:`~tabsafe.service.settings` — settings from YAML, unsafe combinations refused;
* :mod:`~tabsafe.service.prepared` — the records prepared once into a memory-mapped code matrix;
* :mod:`~tabsafe.service.query` — a user-defined table and its resolution against the catalogue;
* :mod:`~tabsafe.service.builder` — counting, protection by the configured chain, release rules,
  the nearest table that passes;
* :mod:`~tabsafe.service.answers` — answers shared by the server processes and kept on disk;
* :mod:`~tabsafe.service.store` — users, hashed API keys, the append-only audit log (SQLite);
* :mod:`~tabsafe.service.schemas`, :mod:`~tabsafe.service.deps`, :mod:`~tabsafe.service.routes`,
  :mod:`~tabsafe.service.app` — the HTTP API (FastAPI) and the web page (``web/index.html``).

Nothing is imported here until asked for, so ``import tabsafe.service`` costs nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Builder", "Settings", "Store", "create_app", "prepare"]

_WHERE = {"Builder": "builder", "Settings": "settings", "Store": "store", "create_app": "app",
          "prepare": "prepared"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"tabsafe.service.{_WHERE[name]}"), name)
    raise AttributeError(name)
