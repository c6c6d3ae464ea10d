"""A loopback TCP proxy whose connections a test can cut: a real network fault, no mock.

``TcpProxy(host, port)`` listens on 127.0.0.1 (a free port, :attr:`TcpProxy.port`) and pipes each
connection to ``host:port``. :meth:`TcpProxy.cut` closes the listener and every piped connection:
the client sees its open connections reset and every new connection refused, as when a network
link or a database server goes away.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class TcpProxy:
    """Pipe 127.0.0.1:``port`` to ``upstream``; use as a context manager (cut on exit)."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._guard = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener was closed: cut
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._guard:
                if self._cut:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), name="tcp-proxy-pipe", daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        with self._guard:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        try:  # on Linux this wakes the blocked accept() and stops listening; close() alone would not
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for end in sockets:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.cut()
