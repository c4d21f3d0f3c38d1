"""One TLS exchange over loopback, for the tests of our certificates."""

from __future__ import annotations

import socket
import ssl
import threading


def exchange(client: ssl.SSLContext, server: ssl.SSLContext, server_hostname: str) -> str:
    """Connect, handshake and send a byte; the client certificate's CN as the
    server saw it ("" if none; "server: <error>" if the server side failed).
    A client-side verification failure raises ssl.SSLCertVerificationError."""
    seen: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            connection, _ = listener.accept()
            try:
                with server.wrap_socket(connection, server_side=True) as tls:
                    peer = tls.getpeercert() or {}
                    seen.extend(
                        v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"
                    )
                    tls.recv(1)
            except (ssl.SSLError, OSError) as failure:
                seen.append(f"server: {failure}")

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            with (
                socket.create_connection(("127.0.0.1", port)) as raw,
                client.wrap_socket(raw, server_hostname=server_hostname) as tls,
            ):
                tls.sendall(b"x")
        finally:
            thread.join(timeout=10)
    return seen[0] if seen else ""
