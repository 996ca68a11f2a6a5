"""Test helpers for tabsafe and for packages that add methods: the method contract checks."""
