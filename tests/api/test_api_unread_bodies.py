"""A body refused unread ends its connection (issue 28), on a real server and a raw socket: a
stranger who announces 4 MB and sends the headers gets its 401 with `Connection: close` and the
server hangs up, without waiting for (or parsing) the 4 MB; a refusal with no body keeps the
connection, and so does a keyed request."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx

from tests.api._server import bearer, new_key, real_server

base_url, client = real_server(key_name="unused")


def raw_exchange(base_url: str, head: bytes, *, timeout: float = 30) -> bytes:
    """Send `head` (and nothing of the body it announces) and read until the server hangs up."""
    address = urlsplit(base_url)
    with socket.create_connection((address.hostname, address.port), timeout=timeout) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_stranger_announcing_4_mb_gets_401_and_the_connection_closes(base_url):  # type: ignore[no-untyped-def]
    head = (b"POST /runs HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            b"Content-Length: 4000000\r\n\r\n[")
    answer = raw_exchange(base_url, head)  # returns only because the server closed: the body never came
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 401 Unauthorized" and b"connection: close" in rest.lower()


def test_a_refusal_without_a_body_and_a_keyed_request_keep_the_connection(base_url, clean_db, settings):  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=base_url) as http:
        refused = http.get("/runs/1")
        assert refused.status_code == 401 and refused.headers.get("connection") != "close"
        keyed = http.post("/runs", json={"question": "Q?", "answer": "A."}, headers=bearer(new_key(settings)))
        assert keyed.status_code == 202 and keyed.headers.get("connection") != "close"
