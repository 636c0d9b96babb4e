"""The lean HTTP/1.1 transport against real sockets on 127.0.0.1: servers that answer in every framing
HTTP allows, that compress unasked, that drop idle connections, that hang, that speak garbage, and
over TLS with a certificate made for the test."""

from __future__ import annotations

import asyncio
import gzip
import json
import ssl
import zlib

import pytest

from toolsweep.models.http import ConnectionPool, HTTPConnectionError, HTTPProtocolError, InvalidURL, parse_url

BODY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hé"}}]}).encode()


async def _serve(answer, *, ssl_context=None):
    """A server on 127.0.0.1 that reads each request whole and lets `answer(request, writer)` reply.
    Returns (server, base URL, list of (connection number, request bytes))."""
    seen: list[tuple[int, bytes]] = []
    connections = [0]

    async def handle(reader, writer):
        connections[0] += 1
        number = connections[0]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                request = head + await reader.readexactly(length)
                seen.append((number, request))
                if await answer(request, writer) == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if ssl_context else "http"
    return server, f"{scheme}://127.0.0.1:{port}/v1/chat/completions", seen


def _ok(body: bytes = BODY, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


async def _answer_ok(request, writer):
    writer.write(_ok())
    await writer.drain()


def run(coro):
    return asyncio.run(coro)


def test_keep_alive_reuses_one_connection_and_sends_the_request_whole():
    async def main():
        server, url, seen = await _serve(_answer_ok)
        pool = ConnectionPool()
        async with server:
            for i in range(3):
                r = await pool.post(url, b'{"n":%d}' % i, {"Content-Type": "application/json",
                                                          "Authorization": "Bearer k"}, 5)
                assert (r.status, r.body, r.headers["content-type"]) == (200, BODY, "application/json")
        pool.close()
        return seen

    seen = run(main())
    assert [n for n, _ in seen] == [1, 1, 1]  # one connection for the three requests
    head, body = seen[2][1].split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and body == b'{"n":2}'
    assert b"\r\nAuthorization: Bearer k" in head and b"\r\nHost: 127.0.0.1:" in head


def test_chunked_gzip_deflate_and_read_until_close_bodies_are_read_whole():
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (BODY[:7], BODY[7:20], BODY[20:])) + b"0\r\n\r\n"
    answers = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked,
        _ok(gzip.compress(BODY), b"Content-Encoding: gzip\r\n"),
        _ok(zlib.compress(BODY), b"Content-Encoding: deflate\r\n"),
        b"HTTP/1.0 200 OK\r\n\r\n" + BODY,  # no length: the body ends with the connection
    ]

    async def answer(request, writer):
        writer.write(answers.pop(0))
        await writer.drain()
        return "close" if not answers else None

    async def main():
        server, url, _ = await _serve(answer)
        pool = ConnectionPool()
        async with server:
            return [await pool.post(url, b"{}", {}, 5) for _ in range(4)]

    assert [r.body for r in run(main())] == [BODY] * 4


def test_a_connection_dropped_while_idle_is_replaced_without_an_error():
    opened: list[object] = []
    answered: dict[object, int] = {}  # requests answered per connection

    async def answer(request, writer):
        if writer not in answered:
            opened.append(writer)
            answered[writer] = 0
        number = opened.index(writer) + 1
        if number == 1 and answered[writer] == 1:
            return "close"  # the idle timeout struck as the second request arrived: no answer
        answered[writer] += 1
        writer.write(_ok())
        await writer.drain()
        return "close" if number == 2 else None  # the second connection closes after its answer

    async def main():
        server, url, seen = await _serve(answer)
        pool = ConnectionPool()
        async with server:
            first = await pool.post(url, b"{}", {}, 5)
            second = await pool.post(url, b"{}", {}, 5)  # sent on the pooled connection, then again
            await asyncio.sleep(0.1)  # the second connection's close reaches the pool while it is idle
            third = await pool.post(url, b"{}", {}, 5)
        return first, second, third, seen

    first, second, third, seen = run(main())
    assert first.body == second.body == third.body == BODY
    # connection 1 took the second request and closed without answering; it went out again on 2;
    # the third skipped the closed idle connection 2 and opened 3
    assert [n for n, _ in seen] == [1, 1, 2, 3]


def test_a_hung_server_times_out_and_its_connection_is_not_reused():
    calls = [0]

    async def answer(request, writer):
        calls[0] += 1
        if calls[0] == 1:
            await asyncio.sleep(5)  # hangs on the first request
        writer.write(_ok())
        await writer.drain()

    async def main():
        server, url, seen = await _serve(answer)
        pool = ConnectionPool()
        async with server:
            with pytest.raises(TimeoutError):
                await pool.post(url, b"{}", {}, 0.3)
            r = await pool.post(url, b"{}", {}, 5)
        return r, seen

    r, seen = run(main())
    assert r.body == BODY and [n for n, _ in seen] == [1, 2]  # a fresh connection after the timeout


@pytest.mark.parametrize("reply,error", [
    (b"SPEAKING NONSENSE\r\n\r\n", HTTPProtocolError),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"trunc", HTTPConnectionError),  # cut mid-body
    (_ok(b"not-brotli", b"Content-Encoding: br\r\n"), HTTPProtocolError),
])
def test_broken_answers_are_typed_errors(reply, error):
    async def answer(request, writer):
        writer.write(reply)
        await writer.drain()
        return "close"

    async def main():
        server, url, _ = await _serve(answer)
        async with server:
            with pytest.raises(error):
                await ConnectionPool().post(url, b"{}", {}, 5)

    run(main())


def test_refused_connections_and_unusable_urls():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once it is closed
    with pytest.raises(HTTPConnectionError, match="cannot connect"):
        run(ConnectionPool().post(f"http://127.0.0.1:{port}/v1", b"{}", {}, 5))
    for bad in ("ftp://host/v1", "http:///v1", "localhost:8000/v1", "http://host:99999/v1"):
        with pytest.raises(InvalidURL):
            parse_url(bad)
    assert parse_url("http://[::1]:8000/v1?x=1").origin.host_header == b"[::1]:8000"
    assert parse_url("https://api.example.com/v1").origin.port == 443


def test_tls_with_a_certificate_the_client_trusts(tmp_path, monkeypatch):
    import trustme
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))

    async def main(pool):
        server, url, _ = await _serve(_answer_ok, ssl_context=server_ctx)
        async with server:
            return await pool.post(url, b"{}", {}, 5)

    with pytest.raises(HTTPConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        run(main(ConnectionPool()))  # an unknown CA is refused
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # as a user points OpenSSL at their CA
    assert run(main(ConnectionPool())).body == BODY
