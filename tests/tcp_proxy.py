"""A loopback TCP proxy whose connections a test can cut: a real network fault, no mock.

``TcpProxy(host, port)`` listens on 127.0.0.1 (a free port, :attr:`TcpProxy.port`) and pipes each
connection to ``host:port``. :meth:`TcpProxy.cut` closes the listener and every piped connection:
the client sees its open connections reset and every new connection refused, as when a network
link or a database server goes away. :meth:`TcpProxy.blackhole` keeps every connection open and
passes nothing on, in either direction, until :meth:`TcpProxy.restore`: what the client sees of
a network that swallows packets or a paused server — its bytes sent, no answer, no error; a
new connection is accepted and then answered by nothing. Held bytes are passed on at restore.
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
        self._flowing = threading.Event()
        self._flowing.set()
        threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener was closed: cut
                return
            with self._guard:
                self._sockets.append(client)
            threading.Thread(target=self._connect, args=(client,), name="tcp-proxy-connect", daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._flowing.wait()  # blackholed: the connection is accepted, and nothing answers it
        try:
            upstream = socket.create_connection(self._upstream, timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        with self._guard:
            if self._cut:
                client.close()
                upstream.close()
                return
            self._sockets.append(upstream)
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(source, sink), name="tcp-proxy-pipe", daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                self._flowing.wait()  # blackholed: held until restored
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def blackhole(self) -> None:
        """Pass nothing on (connections stay open, new ones are accepted) until :meth:`restore`."""
        self._flowing.clear()

    def restore(self) -> None:
        """Pass bytes on again, those held first."""
        self._flowing.set()

    def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        with self._guard:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        self._flowing.set()  # held pipes wake, and find their sockets shut
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
