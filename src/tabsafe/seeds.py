"""The one seed policy: how a seed is checked, drawn, split between the steps of a run, and shown.

A seed that drives noise is as secret as the original counts: from the seed and the release an
intruder replays the noise and subtracts it (barnardisation, random rounding: every original
inner cell comes back; issue #25). So, in every surface (the CLI, chains, a method alone,
releases, evaluation, the service):

* **Drawn seeds are wide.** :func:`draw_seed` draws 63 bits from the operating system. A search
  over the seeds that could have made a release then costs about ``2**62`` replays — out of reach —
  where the earlier ``randbelow(10**9)`` (30 bits) fell to one machine in hours
  (``python bench/run.py seed-search`` measures the replay rate).
* **Small seeds are warned about.** A seed a person types (``--seed 5``) is found by the same search
  in moments: :func:`small_seed_warning` says so on the terminal (the run still goes ahead: a small
  seed is fine for tests and examples, not for a release).
* **Steps derive their streams the same way everywhere.** A run's seed ``S`` is never used as a
  random stream itself: step ``k`` of the run (``0`` for a method alone, ``k`` for the ``k``-th
  method of a chain) draws from :func:`stream_seed` ``(S, k)`` = ``SeedSequence(S, spawn_key=(k,))``.
  So ``--method barnardisation --seed 5`` and ``--method barnardisation,additivity --seed 5``
  add the same noise, and a release, the evaluation runner and the service derive exactly what
  the CLI derives.
* **Seeds go to private outputs only.** The seed is recorded in private (0600) records — a report
  written beside an evaluation output, ``--evaluation``, the audit's ``--out`` — from which a rerun
  gives byte-identical releases. Public reports and stdout carry :func:`fingerprint` instead: a
  keyed hash (HMAC-SHA256) under a secret key of the user's (:func:`fingerprint_key`), enough to
  check that two runs used the same seed and useless for a search over seeds without the key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Any

from tabsafe.errors import InputError, param

#: Seeds are integers in ``0..MAX_SEED`` (they fit a signed 64-bit integer).
MAX_SEED = 2**63 - 1

#: Seeds below this are found by a search over the seeds in reach of one machine (2**40 replays
#: of a small table at the measured ~10**5–10**6 replays/s per core is days on a few hundred
#: cores); drawn seeds are 63 bits.
SMALL_SEED = 2**40

#: The environment variable holding the fingerprint key (any text; wins over the key file).
KEY_ENV = "TABSAFE_SEED_KEY"

_DOMAIN = b"tabsafe seed fingerprint v1\x00"


def check_seed(seed: Any, *, name: str = "seed") -> int | None:
    """``None`` or the seed as an int; anything else is an :class:`InputError`."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) and type(seed).__name__ not in {"int64", "int32"}:
        raise InputError(f"{param(name)} must be an integer in 0..{MAX_SEED}; got {seed!r}")
    seed = int(seed)
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"{param(name)} must be an integer in 0..{MAX_SEED}; got {seed}")
    return seed


def draw_seed() -> int:
    """A fresh 63-bit seed from the operating system, for a random run given none."""
    return secrets.randbits(63)


def stream_seed(seed: int, step: int = 0) -> int:
    """The seed of step ``step``'s random stream in a run with seed ``seed`` (63 bits).

    ``SeedSequence(seed, spawn_key=(step,))`` is the ``step``-th child of ``SeedSequence(seed)``
    (``spawn``), so a chain's ``k``-th step and a method run alone as step ``k`` share a stream.

    >>> stream_seed(5) == stream_seed(5, 0) != stream_seed(5, 1)
    True
    """
    import numpy as np

    state = np.random.SeedSequence(int(seed), spawn_key=(int(step),)).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(1))


def small_seed_warning(seed: int | None) -> str | None:
    """The warning a small given seed deserves, or None."""
    if seed is None or seed >= SMALL_SEED:
        return None
    return (f"seed {seed} is small: anyone can try every seed below {SMALL_SEED:,} against the release, "
            "replay the noise and take it off; for a release omit --seed (a 63-bit seed is drawn) and keep "
            "the seed in private outputs only")


def fingerprint_key() -> bytes | None:
    """The secret key seed fingerprints are made with, or None when there is none to be had.

    ``$TABSAFE_SEED_KEY`` when set (share it to compare fingerprints across machines); otherwise
    32 random bytes kept in ``$XDG_CONFIG_HOME/tabsafe/seed-fingerprint.key`` (``~/.config``),
    made private (0600, folder 0700) on first use.
    """
    env = os.environ.get(KEY_ENV)
    if env:
        return env.encode("utf-8")
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    path = base / "tabsafe" / "seed-fingerprint.key"
    try:
        key = path.read_bytes()
        if len(key) >= 16:
            return key
    except OSError:
        pass
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it meanwhile (or it is short): read what is there
        try:
            key = path.read_bytes()
        except OSError:
            return None
        return key if len(key) >= 16 else None
    except OSError:
        return None
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


def fingerprint(seed: int | None, *, key: bytes | None = None) -> str | None:
    """A public stand-in for ``seed``: ``hmac-sha256:`` and 32 hex digits of HMAC-SHA256 under the
    user's :func:`fingerprint_key` (None for no seed, or when no key can be had).

    Two runs with the same seed and key show the same fingerprint; without the key the fingerprint
    says nothing about the seed (HMAC is a pseudo-random function of its key), so even a small seed
    cannot be found from it.

    >>> fingerprint(5, key=b"k" * 32) == fingerprint(5, key=b"k" * 32) != fingerprint(6, key=b"k" * 32)
    True
    """
    if seed is None:
        return None
    key = fingerprint_key() if key is None else key
    if key is None:
        return None
    digest = hmac.new(key, _DOMAIN + str(int(seed)).encode("ascii"), hashlib.sha256).hexdigest()
    return f"hmac-sha256:{digest[:32]}"


def seed_line(seed: int | None, *, given: int | None, kept: str | None = None) -> str | None:
    """The line stdout carries about a drawn seed (published: its fingerprint, never the seed);
    None when the user gave the seed (they have it) or the run is not random. ``kept`` names the
    private output holding the seed, if any."""
    if seed is None or given is not None:
        return None
    fp = fingerprint(seed) or "unavailable (no fingerprint key)"
    where = (f"kept in the private {kept}" if kept else
             "not kept: give --evaluation FILE with --report FILE.json to keep it (private) and repeat this run")
    return f"seed drawn (63 bits; fingerprint {fp}), {where}"
