"""The TCP rendezvous store (csrc/collective/tcp_store.h) when its process runs out of memory for
real: a child process serves the store on 127.0.0.1, then lowers its own address-space limit
(RLIMIT_AS) a few MB above what it maps. A failure of the store itself while serving one client
(no thread for a new connection; a request too large to hold) must reach that client as an
error naming what failed, be reported to the store's owner (TcpStoreServer.serving_errors) with
the client, the operation and the key, close that connection, and leave the store serving the
others. Before, such an exception (std::system_error, std::bad_alloc) escaped its thread and
ended the process (std::terminate), taking every rank's rendezvous with it.

The child runs with one malloc arena (MALLOC_ARENA_MAX=1): a thread's own arena reserves 64 MB
of address space ahead of use, which the limit would not see, so allocations would fail or not
depending on which thread made them."""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading

import pytest

from fleet import _core
from fleet.errors import InvalidArgument

pytestmark = pytest.mark.timeout(120)

SERVER = """
import json, resource, sys
from fleet import _core
server = _core.TcpStoreServer("127.0.0.1", 0)
print(server.port, flush=True)
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
for line in sys.stdin:
    command, *args = line.split()
    if command == "limit":  # headroom in MB above what is mapped now
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + int(args[0]) * 2**20, hard))
        print("limited", flush=True)
    elif command == "unlimit":
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        print(json.dumps(server.serving_errors), flush=True)
server.close()
"""

SET, ERROR = 1, 102


class StoreProcess:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, MALLOC_ARENA_MAX="1"),
        )
        self.port = int(self.proc.stdout.readline())

    def command(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"the store process ended: {self.stderr()}"
        return answer.strip()

    def limit(self, headroom_mb: int) -> None:
        assert self.command(f"limit {headroom_mb}") == "limited"

    def unlimit(self) -> list[str]:
        """Lifts the limit; returns what the store reported to its owner meanwhile."""
        return json.loads(self.command("unlimit"))

    def stderr(self) -> str:
        self.proc.kill()
        return self.proc.communicate(timeout=10)[1][-3000:]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def store():
    process = StoreProcess()
    try:
        yield process
    finally:
        process.close()


def client(port: int) -> _core.TcpStore:
    return _core.TcpStore("127.0.0.1", port, connect_timeout_s=10, io_timeout_s=30)


def read_error_reply(s: socket.socket) -> str:
    """The message of the one error frame the store sends before closing `s`."""
    reply = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        reply += chunk
    op, count = struct.unpack("=BI", reply[:5])
    assert (op, count) == (ERROR, 1), reply[:200]
    (length,) = struct.unpack("=Q", reply[5:13])
    return reply[13 : 13 + length].decode()


def test_a_connection_the_store_has_no_thread_for_gets_an_error_and_the_store_lives(store):
    served = client(store.port)  # connected, with its serving thread, before the limit
    served.set("before", b"1")
    store.limit(2)  # less than a thread's stack
    with pytest.raises(InvalidArgument) as refused:
        client(store.port)
    message = str(refused.value)
    assert "cannot start a thread to serve" in message and "127.0.0.1:" in message, message
    # The connections already served go on.
    assert served.get("before", timeout_s=5) == b"1"
    served.set("during", b"2")
    reported = store.unlimit()
    assert len(reported) == 1 and "cannot start a thread to serve 127.0.0.1:" in reported[0]
    assert client(store.port).get("during", timeout_s=5) == b"2"


def test_a_request_too_large_for_memory_fails_that_connection_only(store):
    served = client(store.port)
    sender = socket.create_connection(("127.0.0.1", store.port), timeout=30)
    served.set("before", b"1")
    store.limit(8)  # the serving threads exist; a 48 MB value cannot be held
    value = b"v" * (48 << 20)
    request = struct.pack("=BIQ", SET, 2, 3) + b"big" + struct.pack("=Q", len(value))

    def send() -> None:
        try:
            sender.sendall(request)
            sender.sendall(value)
        except OSError:
            pass  # the store closes the connection once it has answered

    sending = threading.Thread(target=send)
    sending.start()
    try:
        message = read_error_reply(sender)
    finally:
        sending.join(timeout=60)
        sender.close()
    assert "SET of key 'big'" in message and "out of memory" in message, message
    assert served.get("before", timeout_s=5) == b"1"
    served.set("during", b"2")
    reported = store.unlimit()
    assert len(reported) == 1, reported
    assert re.search(r"serving 127\.0\.0\.1:\d+ failed in SET of key 'big'", reported[0])
    assert client(store.port).get("during", timeout_s=5) == b"2"
    assert client(store.port).check(["big"]) is False
