"""What every process a server starts does first: end with its supervisor, and say what it is."""

from __future__ import annotations

import os
import signal
import time


def follow_parent() -> None:
    """End this process when the supervisor is gone (killed with SIGKILL, it cannot stop its
    processes itself): a thread checks every second that the parent is still the same process."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)  # the process's own graceful stop (uvicorn's, the recorder's)

    threading.Thread(target=watch, name="tabsafe-parent-watch", daemon=True).start()


def name_process(title: bytes) -> None:
    """Name this process as ``ps`` and ``/proc/<pid>/comm`` show it (Linux ``prctl(PR_SET_NAME)``,
    at most 15 bytes; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, title[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


__all__ = ["follow_parent", "name_process"]
