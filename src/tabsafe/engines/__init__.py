"""Engines that turn microdata into tables: a dialect and a session each, under the shared
planner (:mod:`tabsafe.engines.planner`). DuckDB (embedded) is the default; Spark
(:mod:`tabsafe.engines.spark`) runs the same plan on a cluster or locally. Engines are found by
name through the entry-point group ``tabsafe.engines`` (:func:`tabsafe.registry.get_engine`)."""
