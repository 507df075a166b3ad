"""The dashboard against an attacker on the same laptop (issue #24, findings 3-5), on the real
server (uvicorn on 127.0.0.1, real sockets): DNS rebinding (the ``Host`` header), live-tail
slots of dropped connections, and the memory one thread page takes."""

from __future__ import annotations

import gc
import html
import json
import re
import socket
import time
import tracemalloc
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlsplit

from dashboard_support import THREAD, fill, serving
from durable_graph import Checkpointer, Commit, EventIn
from durable_graph.dashboard.app import HISTORY_PAGE, MAX_TAILS, host_allowed
from durable_graph.dashboard.render import SHOWN_CHARS
from durable_graph.sqlite import SqliteCheckpointer

BIG = 256 * 1024
CHECKPOINTS = 50


def _request(url: str, path: str, host: str | None = None) -> tuple[int, bytes]:
    """One GET with a raw socket, so the ``Host`` header is exactly ``host`` (default: the
    URL's); (status, body)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as s:
        given = host if host is not None else parts.netloc
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {given}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_a_loopback_dashboard_answers_only_its_own_host_names(tmp_path: Path) -> None:
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
    ``Host: evil.example:PORT``; only localhost, 127.0.0.1 and [::1] with the port are served."""
    with SqliteCheckpointer.open(str(tmp_path / "s.db")) as store, serving(store) as url:
        fill(store)
        port = urlsplit(url).port
        assert port is not None
        thread = "/thread?id=" + quote(THREAD)
        for good in (
            f"localhost:{port}",
            f"127.0.0.1:{port}",
            f"[::1]:{port}",
            f"LOCALHOST:{port}",
        ):
            status, body = _request(url, thread, good)
            assert status == 200, good
            assert b"six times seven" in body
        for bad in (
            f"evil.example:{port}",
            "evil.example",
            "localhost",  # the port is part of the name a browser sends
            f"localhost:{port + 1}",
            f"127.0.0.2:{port}",
            f"localhost.evil.example:{port}",
            f"localhost:{port}@evil.example",
        ):
            for path in ("/", thread, "/thread/events?id=x", "/static/dashboard.js"):
                status, body = _request(url, path, bad)
                assert status == 400, (bad, path)
                assert b"six times seven" not in body


def test_the_host_check_applies_to_loopback_binds_only() -> None:
    def scope(server: tuple[str, int], host: bytes) -> dict[str, object]:
        return {"type": "http", "server": server, "headers": [(b"host", host)]}

    assert not host_allowed(scope(("127.0.0.1", 8090), b"evil.example:8090"))
    assert not host_allowed(scope(("::1", 8090), b"evil.example:8090"))
    assert host_allowed(scope(("::1", 8090), b"[::1]:8090"))
    assert host_allowed(scope(("127.0.0.1", 80), b"localhost"))
    # Bound to another address, the token (required there) guards the pages, not the name.
    assert host_allowed(scope(("10.1.2.3", 8090), b"dashboard.internal:8090"))


def _open_tail(url: str) -> tuple[socket.socket, bytes]:
    """A live tail on a real socket, read until its first message; (socket, that message)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    s = socket.create_connection((parts.hostname, parts.port), timeout=10)
    path = "/thread/events?after=0&id=" + quote(THREAD)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
    data = b""
    while b"tail open" not in data and b"too many" not in data:
        chunk = s.recv(4096)
        assert chunk, data
        data += chunk
    return s, data


def _hold_every_slot(url: str, seconds: float) -> tuple[list[socket.socket], float]:
    """MAX_TAILS live tails, each retried while the slots are taken; (their sockets, seconds
    it took until all were held). Fails after ``seconds``."""
    start = time.monotonic()
    held: list[socket.socket] = []
    while len(held) < MAX_TAILS:
        s, first = _open_tail(url)
        if b"tail open" in first:
            held.append(s)
            continue
        s.close()
        assert time.monotonic() - start < seconds, f"{MAX_TAILS - len(held)} slots stayed taken"
        time.sleep(0.05)
    return held, time.monotonic() - start


def test_dropped_live_tails_give_their_slots_back_at_once(tmp_path: Path) -> None:
    """Clients that close their connection mid-stream free their slot when the response ends,
    not when the garbage collector comes by: round after round, MAX_TAILS tails are opened and
    dropped, and every slot is free again within a second or two (the tail's wait here is
    0.2 s). The garbage collector is off meanwhile: in a quiet server it may not run for minutes,
    and a slot must not wait for it."""
    gc.collect()
    gc.disable()
    try:
        waits = _drop_rounds(tmp_path)
    finally:
        gc.enable()
    print(f"slots back after {', '.join(f'{w:.2f}' for w in waits)} s")
    assert max(waits) < 3.0


def _drop_rounds(tmp_path: Path) -> list[float]:
    with SqliteCheckpointer.open(str(tmp_path / "s.db")) as store, serving(store) as url:
        fill(store)
        waits = []
        for _ in range(5):
            held, waited = _hold_every_slot(url, 3.0)
            waits.append(waited)
            extra, first = _open_tail(url)
            assert b"too many live tails" in first  # all taken while they are open
            extra.close()
            for s in held:
                s.close()  # dropped mid-stream: the server learns it from the socket alone
        held, waited = _hold_every_slot(url, 3.0)
        waits.append(waited)
        for s in held:
            s.close()
        time.sleep(0.5)  # the last round ends before the server stops
    return waits


def _fill_big_thread(store: Checkpointer) -> None:
    claim = store.claim("big", "run-1")
    parent = None
    for n in range(CHECKPOINTS):
        blob = f"{n:04d}" + "x" * (BIG - 4)
        cp = store.commit(
            claim,
            Commit(
                f"cp-{n:02d}",
                parent,
                "run-1",
                {"blob": blob, "n": n},
                events=(EventIn("big.event", {"blob": blob}),),
            ),
        )
        parent = cp.checkpoint_id
    store.release_claim(claim)


def test_one_thread_page_takes_bounded_memory_and_pages_its_history(tmp_path: Path) -> None:
    """50 checkpoints of 256 KiB (and 50 events as large): one GET of the thread page stays
    small in HTML and in peak memory (tracemalloc, every thread of the process: the server
    runs in it), the history pages on by links, and each cut value links to the whole of it."""
    with SqliteCheckpointer.open(str(tmp_path / "s.db")) as store, serving(store) as url:
        _fill_big_thread(store)
        _request(url, "/thread?id=big")  # warm: imports, caches, the store's connection
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            status, body = _request(url, "/thread?id=big")
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert status == 200
        page = body.decode()
        print(f"thread page: {len(body) / 1024:.0f} KiB of HTML, peak +{peak / 2**20:.1f} MiB")
        assert len(body) < 512 * 1024
        assert peak < 48 * 2**20
        assert page.count("<article class=checkpoint") == HISTORY_PAGE
        assert "bytes)" in page and f"{'x' * (SHOWN_CHARS + 1)}" not in page
        # every checkpoint is reachable, a page at a time
        seen = re.findall(r'id="cp-(cp-\d\d)"', page)
        while (older := re.search(r'<p class=older><a href="([^"]+)"', page)) is not None:
            status, body = _request(url, html.unescape(older.group(1)))
            assert status == 200
            page = body.decode()
            seen += re.findall(r'id="cp-(cp-\d\d)"', page)
        assert seen == [f"cp-{n:02d}" for n in reversed(range(CHECKPOINTS))]
        # a cut value's link gives the whole value
        link = re.search(r'<a class=whole href="([^"]+)"', page)
        assert link is not None
        with urllib.request.urlopen(url + html.unescape(link.group(1)), timeout=10) as r:
            whole = json.loads(r.read())
        assert len(whole["state"]["blob"]) == BIG
        status, body = _request(url, "/thread/value?id=big&seq=3")
        assert status == 200 and len(json.loads(body)["blob"]) == BIG
        assert _request(url, "/thread/value?id=big")[0] == 400
        assert _request(url, "/thread/value?id=big&checkpoint=nope")[0] == 404
