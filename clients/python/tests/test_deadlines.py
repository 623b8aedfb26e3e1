"""Every request of the Python client ends within its timeout (a long-poll within wait + margin),
and an empty or cut-off 200 is an error, never an answer: against a raw TCP server that accepts
and answers each path its own broken way."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from polar_trainer import client as client_module
from polar_trainer.client import PolarClient
from polar_trainer.errors import BadResponse, Unreachable


@pytest.fixture(scope="module")
def raw_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            path = conn.recv(65536).decode("latin1").split(" ")[1]
            if "empty" in path:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n")
                conn.close()
            elif "short" in path:
                conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"batch')
                conn.close()
            else:
                held.append(conn)  # accepted, read, never answered

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    srv.close()
    for conn in held:
        conn.close()


def test_a_request_never_answered_fails_after_the_timeout_naming_the_url(raw_server):
    c = PolarClient(raw_server, "t", timeout=0.5, retries=0)
    started = time.monotonic()
    with pytest.raises(Unreachable) as e:
        c.status("hang")
    assert 0.45 <= time.monotonic() - started < 5
    assert f"GET {raw_server}/v1/batches/hang" in str(e.value)


def test_a_long_poll_gets_its_wait_plus_the_margin(raw_server, monkeypatch):
    monkeypatch.setattr(client_module, "_MARGIN_SECONDS", 0.5)
    c = PolarClient(raw_server, "t", timeout=0.2, retries=0)
    started = time.monotonic()
    with pytest.raises(Unreachable):
        c.results("hang", wait=1)
    assert 1.45 <= time.monotonic() - started < 6


def test_an_empty_or_cut_off_200_is_an_error(raw_server):
    c = PolarClient(raw_server, "t", timeout=2, retries=0)
    with pytest.raises(BadResponse):
        c.status("empty")
    with pytest.raises(Unreachable) as e:
        c.status("short")
    assert "IncompleteRead" in str(e.value)
