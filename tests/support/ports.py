"""A free TCP port on the loopback interface."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now: bound, read and released.

    A server started on it a moment later gets it (the kernel hands out ephemeral ports in turn);
    a test that needs a port nothing answers on uses it as is.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
