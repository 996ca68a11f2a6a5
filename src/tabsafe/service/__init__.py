"""tabsafe service."""
