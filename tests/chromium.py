"""Where the browser tests find Debian's chromium and chromium-driver, and what they do without.

Without them a browser test skips on a developer's machine, but fails when the environment
variable ``CI`` is set (``.ci/run`` sets it): a CI run that skipped the browser would pass without
having tested the web page or the report. ``scripts/ensure-chromium`` installs both.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def require_chromium() -> None:
    """Skip the calling test when chromium or chromedriver is missing; fail instead under CI."""
    missing = [p for p in (CHROMIUM, DRIVER) if not Path(p).exists()]
    if not missing:
        return
    message = f"{' and '.join(missing)} missing: run scripts/ensure-chromium (Debian's chromium, chromium-driver)"
    if os.environ.get("CI", "").strip() not in ("", "0", "false", "False"):
        pytest.fail(f"CI is set and {message}", pytrace=False)
    pytest.skip(message)
