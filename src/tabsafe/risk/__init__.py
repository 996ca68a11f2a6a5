"""Disclosure risk of tables: unsafe-cell rules, the differencing audit and the interval audit."""
