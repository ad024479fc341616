"""Ports for stand-in games started by tests and benches: a block of free loopback ports."""
from __future__ import annotations

import socket


def free_port_block(n: int, tries: int = 50) -> int:
    """A base port whose next ``n`` ports on 127.0.0.1 were free a moment ago (each one probed).

    Raises RuntimeError when no such block was found in ``tries`` attempts.
    """
    for _ in range(tries):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            for port in range(base, base + n):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no block of {n} free ports on 127.0.0.1 in {tries} tries")
