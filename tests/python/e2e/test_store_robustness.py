"""The TCP rendezvous store, served by a real process on 127.0.0.1, against whatever may connect
to its port: HTTP, random bytes, frames claiming huge part counts or lengths, truncated frames,
idle connections and connection floods. After each, the serving process is alive, its memory
did not jump, and a real store client still gets answers."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time

import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from tests.python.e2e.serving_child import serving_child

pytestmark = pytest.mark.timeout(120)

SERVER = """
import sys
from fleet import _core
server = _core.TcpStoreServer("127.0.0.1", 0)
print(server.port, flush=True)
sys.stdin.read()  # serves until the test closes our stdin
server.close()
"""


@pytest.fixture
def store_process():
    with serving_child(SERVER) as served:
        yield served


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def frame(op: int, *parts: bytes) -> bytes:
    out = struct.pack("=BI", op, len(parts))
    for p in parts:
        out += struct.pack("=Q", len(p)) + p
    return out


def send_raw(port: int, payload: bytes, read_reply: bool = True) -> bytes:
    """Sends `payload`, half-closes, and returns what the store answered before closing."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while read_reply:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:  # the store dropped a connection it could not read
                break
            if not chunk:
                break
            reply += chunk
        return reply


def assert_serves(proc: subprocess.Popen, port: int, key: str) -> None:
    assert proc.poll() is None, proc.stderr.read()
    client = _core.TcpStore("127.0.0.1", port, connect_timeout_s=5, io_timeout_s=5)
    client.set(key, b"v\x00\xff")
    assert client.get(key, timeout_s=2) == b"v\x00\xff"
    assert client.add(f"{key}/n", 2) == 2


def test_http_random_bytes_and_huge_claims_get_an_error_and_the_store_lives(store_process):
    proc, port = store_process
    before = rss_kib(proc.pid)
    http = send_raw(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    # The store answered with one error frame naming the bad claim, then closed.
    op, count = struct.unpack("=BI", http[:5])
    assert (op, count) == (102, 1)
    assert b"malformed frame" in http and b"parts (at most 65536)" in http
    assert_serves(proc, port, "after-http")
    huge_count = send_raw(port, struct.pack("=BI", 1, 0xFFFFFFFF))
    assert b"claims 4294967295 parts" in huge_count
    huge_part = send_raw(port, struct.pack("=BIQ", 1, 2, 2**63))
    assert b"part 0 claims 9223372036854775808 bytes" in huge_part
    # Just under the per-part limit, but only a header: nothing is reserved for it.
    claimed = send_raw(port, struct.pack("=BIQ", 1, 2, 60 << 20) + b"x" * 100)
    assert claimed == b""
    rng = __import__("random").Random(13)
    for i in range(200):
        send_raw(port, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
    assert_serves(proc, port, "after-random")
    assert rss_kib(proc.pid) - before < 32 * 1024, "a frame header made the store allocate"


def test_bad_requests_get_errors_on_a_connection_that_stays_usable(store_process):
    proc, port = store_process
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for request, expected in [
            (frame(9, b"k"), b"unknown request code 9"),
            (frame(1, b"only-key"), b"SET takes a key and a value"),
            (frame(3, b"k", b"not-a-number"), b"not a counter"),
            (frame(3, b"k", b"2"), b"2"),
            (frame(3, b"k", b"9223372036854775807"), b"overflows"),
        ]:
            s.sendall(request)
            reply = s.recv(65536)
            assert expected in reply, reply
    client = _core.TcpStore("127.0.0.1", port, connect_timeout_s=5)
    with pytest.raises(InvalidArgument, match="overflows the counter"):
        client.add("k", 2**63 - 1)
    assert_serves(proc, port, "after-bad-requests")


def test_truncated_frames_idle_connections_and_a_flood_do_not_block_others(store_process):
    proc, port = store_process
    # A frame cut short, left open: only that connection waits; others are served meanwhile.
    stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
    stalled.sendall(struct.pack("=BIQ", 1, 2, 10) + b"abc")
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(50)]
    assert_serves(proc, port, "with-idle")
    # Truncated frames whose sender goes away.
    for cut in range(1, 20):
        send_raw(port, frame(1, b"key", b"value")[:cut])
    # More connections than the store serves at once: the extra ones are closed, not queued
    # forever, and the store keeps answering once they go.
    flood = []
    for _ in range(600):
        try:
            flood.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        except OSError:
            break
    for s in flood:
        s.close()
    for s in idle + [stalled]:
        s.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            assert_serves(proc, port, "after-flood")
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    # Threads of closed connections are joined: the serving process does not keep one each.
    time.sleep(0.5)
    _core.TcpStore("127.0.0.1", port).set("poke", b"")  # runs the accept loop's clean-up
    threads = len(os.listdir(f"/proc/{proc.pid}/task"))
    assert threads < 20, f"{threads} threads left after the connections closed"
