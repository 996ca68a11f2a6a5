"""The data model: hierarchies, table specifications, tables and microdata (no engine, no method)."""
