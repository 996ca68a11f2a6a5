"""Engines that turn microdata into tables: a dialect and a session each, under the shared
planner (:mod:`tabsafe.engines.planner`). DuckDB (embedded) is the default; engines are found by
name through the entry-point group ``tabsafe.engines`` (:func:`tabsafe.registry.get_engine`)."""
