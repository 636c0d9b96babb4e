"""The standard proxy variables reach the model HTTP client: HTTP_PROXY for http endpoints (requests
in absolute form), HTTPS_PROXY for https ones (a CONNECT tunnel, TLS to the endpoint inside it),
NO_PROXY to go direct, a proxy's user:password as Proxy-Authorization and in no error. A real
forwarding proxy on 127.0.0.1, written here, in front of real endpoints (plain and TLS)."""

from __future__ import annotations

import asyncio
import base64
import ssl

import pytest
from test_models_http import BODY, _answer_ok, _serve

from toolsweep.evaluator import InfraError
from toolsweep.models.client import Endpoint, OpenAIClient
from toolsweep.models.http import ConnectionPool, InvalidURL


class ForwardingProxy:
    """A minimal HTTP proxy: CONNECT opens a tunnel; any other request is forwarded as it came (the
    origin server takes the absolute form) on a connection to the host it names. Records each
    request line and Proxy-Authorization it saw; `refuse` answers 407 to everything."""

    def __init__(self, refuse: bool = False) -> None:
        self.seen: list[tuple[str, str]] = []
        self.refuse = refuse
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        auth = next((ln.split(":", 1)[1].strip() for ln in lines if ln.lower().startswith("proxy-authorization")), "")
        self.seen.append((lines[0], auth))
        if self.refuse:
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        method, target, _ = lines[0].split(" ", 2)
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            first = b""
        else:
            authority = target.split("://", 1)[1].split("/", 1)[0]
            host, port = authority.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            first = head
        up_writer.write(first)
        await asyncio.gather(self._pipe(reader, up_writer, record=method != "CONNECT"), self._pipe(up_reader, writer))

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, record: bool = False) -> None:
        try:
            while data := await src.read(65536):
                if record and data.startswith(b"POST "):  # a later request on a kept-alive connection
                    self.seen.append((data.split(b"\r\n", 1)[0].decode("latin-1"), ""))
                dst.write(data)
                await dst.drain()
        except ConnectionError:
            pass
        finally:
            dst.close()


def test_an_http_endpoint_is_reached_through_http_proxy_and_no_proxy_goes_direct(monkeypatch):
    proxy = ForwardingProxy()

    async def main():
        server, url, seen = await _serve(_answer_ok)
        address = await proxy.start()
        monkeypatch.setenv("HTTP_PROXY", f"http://user:s3cret@{address}")
        async with server, proxy.server:
            pool = ConnectionPool()
            first = await pool.post(url, b"{}", {}, 5)
            second = await pool.post(url, b"{}", {}, 5)  # on the kept-alive connection to the proxy
            monkeypatch.setenv("NO_PROXY", "127.0.0.1")
            direct = await ConnectionPool().post(url, b"{}", {}, 5)
            return first, second, direct, url, seen

    first, second, direct, url, seen = asyncio.run(main())
    assert first.body == second.body == direct.body == BODY
    assert [line for line, _ in proxy.seen] == [f"POST {url} HTTP/1.1"] * 2  # the third went direct
    assert proxy.seen[0][1] == "Basic " + base64.b64encode(b"user:s3cret").decode()
    assert len(seen) == 3  # the endpoint answered all three


def test_an_https_endpoint_is_reached_through_a_connect_tunnel(tmp_path, monkeypatch):
    import trustme

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    proxy = ForwardingProxy()

    async def main():
        server, url, seen = await _serve(_answer_ok, ssl_context=server_ctx)
        address = await proxy.start()
        monkeypatch.setenv("HTTPS_PROXY", f"http://{address}")
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the https URL must not use this one
        async with server, proxy.server:
            pool = ConnectionPool()
            return await pool.post(url, b"{}", {}, 5), await pool.post(url, b"{}", {}, 5), url, seen

    first, second, url, seen = asyncio.run(main())
    assert first.body == second.body == BODY
    authority = url.split("://")[1].split("/")[0]
    assert [line for line, _ in proxy.seen] == [f"CONNECT {authority} HTTP/1.1"]  # one tunnel, kept alive
    assert len(seen) == 2 and seen[0][1].startswith(b"POST /v1/chat/completions HTTP/1.1")


def test_a_proxy_that_refuses_is_an_infrastructure_failure_that_names_no_password(monkeypatch):
    proxy = ForwardingProxy(refuse=True)

    async def main():
        address = await proxy.start()
        monkeypatch.setenv("HTTPS_PROXY", f"http://user:s3cret@{address}")
        async with proxy.server:
            client = OpenAIClient(Endpoint(name="hosted", model="m", base_urls=["https://api.example.invalid/v1"],
                                           max_retries=1), backoff_s=0.01)
            with pytest.raises(InfraError) as err:
                await client.chat([{"role": "user", "content": "q"}])
            return err.value

    error = asyncio.run(main())
    assert "refused the tunnel" in str(error) and "407" in str(error)
    assert "s3cret" not in str(error) and "user:" not in str(error)
    assert proxy.seen[0][0] == "CONNECT api.example.invalid:443 HTTP/1.1"


def test_a_proxy_over_tls_is_refused_as_configuration(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")

    async def main():
        return await ConnectionPool().post("https://api.example.invalid/v1/chat/completions", b"{}", {}, 5)

    with pytest.raises(InvalidURL, match="over TLS is not supported"):
        asyncio.run(main())
