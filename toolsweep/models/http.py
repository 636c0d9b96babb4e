"""A lean HTTP/1.1 client for JSON POSTs: keep-alive connections per event loop, parsed by httptools.

A general-purpose client cost about 0.25 ms of CPU per model call in a rollout worker (request and
response objects, header multidicts, stream readers, a timer per request), five times what a call
needs: at 256 episodes in flight it, not the model server, set the pace (bench/scheduler_http.py).
This one writes a request as one buffer on a pooled connection and parses the answer with llhttp
(httptools, the parser uvicorn uses): status, headers, a body by Content-Length, chunks or the end of
the connection, gzip/deflate if a server compresses unasked. TLS through the standard `ssl` module
(certificates as the system, or SSL_CERT_FILE, says). Proxies as the standard variables say
(HTTP_PROXY, HTTPS_PROXY, NO_PROXY, in either case, read by the standard library's `urllib.request`
rules): an http URL is sent to its proxy in absolute form, an https one through a CONNECT tunnel with
TLS to the endpoint itself; a proxy's user:password become a Proxy-Authorization header and appear in
no error. No cookies or redirects: a model endpoint needs none of them.

Failures are typed for the caller's classification (`evaluator.failures`): `InvalidURL` (the URL is
unusable), `InvalidHeader` (a header value is not Latin-1), `HTTPConnectionError` (refused, reset, closed before the answer was complete),
`HTTPProtocolError` (the bytes are not HTTP), `TimeoutError` (no complete answer in time). A pooled
connection that the server closed while it sat idle is replaced once at no cost to the caller.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import urllib.request
import zlib
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

import httptools


class InvalidURL(ValueError):
    """The URL cannot be reached as given (no http/https scheme, no host, a host that is not a name)."""


class InvalidHeader(ValueError):
    """A request header cannot be sent (HTTP/1.1 header values are Latin-1): a configured key is wrong."""


class HTTPConnectionError(OSError):
    """The connection failed, or closed before the whole answer arrived."""


class HTTPProtocolError(Exception):
    """The server's answer is not valid HTTP/1.1 (or uses an encoding this client cannot read)."""


class _StaleConnection(HTTPConnectionError):
    """A reused connection closed before a byte of the answer came: the server had dropped it idle."""


class HTTPResponse(NamedTuple):
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int
    host_header: bytes


@dataclass(frozen=True)
class _Target:
    origin: _Origin
    path: bytes


@dataclass(frozen=True)
class _Proxy:
    origin: _Origin  # where connections go
    auth: bytes = b""  # a Proxy-Authorization header line, or nothing


def parse_proxy(url: str) -> _Proxy:
    """A proxy URL of the standard variables (`http://[user:password@]host:port`; a bare host:port is
    taken as http)."""
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"a proxy URL from the environment: {exc}") from None
    if parts.scheme != "http" or not parts.hostname:
        raise InvalidURL("a proxy URL from the environment (HTTP_PROXY/HTTPS_PROXY): expected "
                         "http://[user:password@]host:port (a proxy reached over TLS is not supported)")
    auth = b""
    if parts.username is not None:
        token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
        auth = f"Proxy-Authorization: Basic {token}\r\n".encode()
    return _Proxy(_Origin("http", parts.hostname, port or 80, parts.hostname.encode("idna")), auth)


def proxy_for(origin: _Origin, proxies: dict[str, str]) -> _Proxy | None:
    """The proxy a request to `origin` goes through (`proxies` as `urllib.request.getproxies_environment`
    gives them), or None: no proxy for its scheme, or NO_PROXY names its host."""
    url = proxies.get(origin.scheme)
    if not url or urllib.request.proxy_bypass_environment(f"{origin.host}:{origin.port}", proxies):
        return None
    return parse_proxy(url)


class _TunnelAnswer(asyncio.Protocol):
    """Reads a proxy's answer to CONNECT (status line and headers, no body)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.done: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if b"\r\n\r\n" in self.buffer and not self.done.done():
            self.done.set_result(self.buffer)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(HTTPConnectionError(f"the proxy closed the tunnel ({exc or 'no answer'})"))


def parse_url(url: str) -> _Target:
    """Origin and request path of `url` (http or https)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"{url}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidURL(f"{url}: expected http(s)://host[:port]/path")
    default = 443 if parts.scheme == "https" else 80
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    header = shown if port in (None, default) else f"{shown}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        return _Target(_Origin(parts.scheme, host, port or default, header.encode("idna")), path.encode())
    except UnicodeError as exc:
        raise InvalidURL(f"{url}: the host is not a valid name ({exc})") from None


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its answer parsed as the bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.keep_alive = True
        self._answer: asyncio.Future[HTTPResponse] | None = None
        self._received = False
        self._status = 0
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HTTPProtocolError(f"invalid HTTP response: {exc}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is None or self._answer.done():
            return
        if self._status and "content-length" not in self._headers and \
                "chunked" not in self._headers.get("transfer-encoding", "").lower():
            self.on_message_complete()  # a body delimited by the end of the connection
        elif not self._received:
            self._fail(_StaleConnection("the connection closed before the server answered"))
        else:
            self._fail(HTTPConnectionError(f"the connection closed mid-answer ({exc or 'by the server'})"))

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._headers, self._body = {}, []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive() if not self.closed else False
        answer, self._answer = self._answer, None
        if answer is not None and not answer.done():
            try:
                answer.set_result(HTTPResponse(self._status, self._headers, _decoded(self._headers, self._body)))
            except HTTPProtocolError as exc:
                answer.set_exception(exc)
                self.keep_alive = False

    def _fail(self, exc: Exception) -> None:
        answer, self._answer = self._answer, None
        if answer is not None and not answer.done():
            answer.set_exception(exc)

    async def exchange(self, request: bytes) -> HTTPResponse:
        """Send one request and wait for its whole answer."""
        self._answer = asyncio.get_running_loop().create_future()
        self._received, self._status = False, 0
        assert self.transport is not None
        self.transport.write(request)
        return await self._answer

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _decoded(headers: dict[str, str], parts: list[bytes]) -> bytes:
    body = b"".join(parts)
    encoding = headers.get("content-encoding", "identity").lower()
    if encoding in ("identity", ""):
        return body
    try:
        if encoding == "gzip":
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send it
    except zlib.error as exc:
        raise HTTPProtocolError(f"a {encoding} body that does not decompress: {exc}") from None
    raise HTTPProtocolError(f"unsupported Content-Encoding {encoding!r}")


@dataclass
class ConnectionPool:
    """Keep-alive connections of one event loop, at most `max_idle` kept per origin."""

    max_idle: int = 64
    user_agent: str = "toolsweep"
    closed: bool = False
    _idle: dict[_Origin, list[_Connection]] = field(default_factory=dict, init=False, repr=False)
    _targets: dict[str, _Target] = field(default_factory=dict, init=False, repr=False)
    _ssl: ssl.SSLContext | None = field(default=None, init=False, repr=False)
    # the standard proxy variables, read once per pool (the process's environment when it was made)
    proxies: dict[str, str] = field(default_factory=urllib.request.getproxies_environment, repr=False)
    _routes: dict[_Origin, _Proxy | None] = field(default_factory=dict, init=False, repr=False)

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            target = self._targets[url] = parse_url(url)
        return target

    async def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> HTTPResponse:
        """POST `body` to `url` and return the whole answer within `timeout_s` (connecting included)."""
        target = self._target(url)
        request = self._request(target, body, headers)
        async with asyncio.timeout(timeout_s):
            for _ in range(2):
                conn, reused = self._pooled(target.origin)
                if conn is None:
                    conn = await self._connect(target.origin)
                try:
                    response = await conn.exchange(request)
                except _StaleConnection:
                    if reused:
                        continue  # dropped while idle: the server never saw this request
                    raise
                except BaseException:
                    conn.abort()  # a timeout, a cancellation or a broken answer: never reused
                    raise
                self._release(target.origin, conn)
                return response
        raise HTTPConnectionError("the server closed two connections in a row before answering")

    def _route(self, origin: _Origin) -> _Proxy | None:
        if origin not in self._routes:
            self._routes[origin] = proxy_for(origin, self.proxies)
        return self._routes[origin]

    def _request(self, target: _Target, body: bytes, headers: dict[str, str]) -> bytes:
        path, auth = target.path, b""
        proxy = self._route(target.origin)
        if proxy is not None and target.origin.scheme == "http":  # absolute form, to the proxy
            path = b"http://" + target.origin.host_header + target.path
            auth = proxy.auth
        lines = [b"POST ", path, b" HTTP/1.1\r\nHost: ", target.origin.host_header,
                 b"\r\nUser-Agent: ", self.user_agent.encode(), b"\r\nAccept: application/json\r\n", auth]
        for name, value in headers.items():
            try:
                lines += [name.encode("latin-1"), b": ", value.encode("latin-1"), b"\r\n"]
            except UnicodeEncodeError:
                raise InvalidHeader(f"the {name} header holds characters HTTP cannot send") from None
        lines += [b"Content-Length: ", str(len(body)).encode(), b"\r\n\r\n", body]
        return b"".join(lines)

    def _pooled(self, origin: _Origin) -> tuple[_Connection | None, bool]:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn, True
        return None, False

    async def _connect(self, origin: _Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        context = None
        if origin.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            context = self._ssl
        proxy = self._route(origin)
        if proxy is not None:
            return await self._through(proxy, origin, context)
        try:
            _, conn = await loop.create_connection(
                _Connection, origin.host, origin.port, ssl=context,
                server_hostname=origin.host if context is not None else None,
            )
        except OSError as exc:
            raise HTTPConnectionError(f"cannot connect to {origin.host}:{origin.port}: {exc}") from exc
        return conn

    async def _through(self, proxy: _Proxy, origin: _Origin, context: ssl.SSLContext | None) -> _Connection:
        """A connection to `origin` by way of its proxy: to the proxy itself for http (requests then name
        the whole URL), a CONNECT tunnel with TLS to the endpoint inside it for https."""
        loop = asyncio.get_running_loop()
        where = f"the proxy {proxy.origin.host}:{proxy.origin.port}"
        try:
            if context is None:
                _, conn = await loop.create_connection(_Connection, proxy.origin.host, proxy.origin.port)
                return conn
            transport, answer = await loop.create_connection(_TunnelAnswer, proxy.origin.host, proxy.origin.port)
        except OSError as exc:
            raise HTTPConnectionError(f"cannot connect to {where}: {exc}") from exc
        authority = f"{origin.host}:{origin.port}".encode("idna")
        transport.write(b"CONNECT " + authority + b" HTTP/1.1\r\nHost: " + authority + b"\r\n" + proxy.auth + b"\r\n")
        try:
            head = await answer.done
        except BaseException:
            transport.abort()
            raise
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or parts[1] != "200":
            transport.abort()
            raise HTTPConnectionError(f"{where} refused the tunnel to {origin.host}:{origin.port}: {status_line[:100]}")
        conn = _Connection()
        try:
            tls = await loop.start_tls(transport, conn, context, server_hostname=origin.host)
        except (OSError, ssl.SSLError) as exc:
            transport.abort()
            raise HTTPConnectionError(f"TLS to {origin.host}:{origin.port} through {where}: {exc}") from exc
        conn.connection_made(tls)
        return conn

    def _release(self, origin: _Origin, conn: _Connection) -> None:
        idle = self._idle.setdefault(origin, [])
        if self.closed or conn.closed or not conn.keep_alive or len(idle) >= self.max_idle:
            conn.abort()
        else:
            idle.append(conn)

    def close(self) -> None:
        """Close every idle connection (those in use close when their request ends)."""
        self.closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.abort()
        self._idle.clear()
