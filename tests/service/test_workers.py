"""``tabsafe serve --workers N``: N processes, each with its own listening socket on one port."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.service.conftest import LENIENT, TABSAFE, Server, add_key, write_config


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_two_workers_answer_alike_refuse_a_taken_port_and_stop_together(small_census, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path / "service.yaml", state, LENIENT, workers=2)
    key = add_key(small_census.directory, config, "wes")
    server = Server(small_census.directory, config).start()
    try:
        assert server.proc is not None
        workers = [p for p in _children(server.proc.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(workers) == 2
        query = {"dimensions": [{"variable": "sex"}, {"variable": "activity"}]}
        # each request on a new connection: the kernel spreads them over the processes
        answers = [server.table(query, key) for _ in range(30)]
        assert {status for status, _, _ in answers} == {200}
        assert all(body["rows"] == answers[0][1]["rows"] for _, body, _ in answers)
        # a second server on the same port is refused in one line; the first goes on answering
        second = subprocess.run([*TABSAFE, "serve", "--data", str(small_census.directory), "--config", str(config),
                                 "--port", str(server.port)], capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert second.stderr.strip().splitlines() == [second.stderr.strip()]
        assert f"cannot listen on 127.0.0.1:{server.port}" in second.stderr and "Traceback" not in second.stderr
        assert server.table(query, key)[0] == 200
    finally:
        server.stop()
    # one audit row per query, written by both processes into one hash chain
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    store = Store(Settings.load(data=small_census.directory, config=config).store_path)
    assert store.audit_count() == 31
    assert store.verify() is None
    assert not any(_alive(p) for p in workers)


def test_workers_end_when_their_supervisor_is_killed(small_census, tmp_path):
    """SIGKILL leaves the supervisor no way to stop its workers: they notice and stop."""
    import signal
    import time

    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path / "service.yaml", state, LENIENT, workers=2)
    server = Server(small_census.directory, config).start()
    assert server.proc is not None
    workers = [p for p in _children(server.proc.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(workers) == 2
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    server.proc = None
    deadline = time.time() + 120  # an outer guard: the loop ends as soon as the workers are gone
    while time.time() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.2)
    assert not any(_alive(p) for p in workers)
