"""``rulka tmi check --port N``: tell a user what is wrong with the link to one game instance."""
from __future__ import annotations

import enum
import socket
import struct
from dataclasses import dataclass

from ..link.protocol import DEFAULT_HOST, MessageType, TMInterfaceError, TMInterfaceTimeout, recv_exactly


class PortStatus(enum.Enum):
    """Outcome of :func:`check_port`."""

    OK = "ok"
    NOTHING_LISTENING = "nothing_listening"
    NO_ON_CONNECT = "no_on_connect"
    WRONG_PROTOCOL = "wrong_protocol"


@dataclass
class PortReport:
    """What :func:`check_port` found, with advice for a human."""

    port: int
    status: PortStatus
    message: str

    @property
    def ok(self) -> bool:
        return self.status == PortStatus.OK

    def __str__(self) -> str:
        return f"port {self.port}: {self.status.value}: {self.message}"


def check_port(port: int, *, host: str = DEFAULT_HOST, timeout_s: float = 5.0) -> PortReport:
    """Connect to ``host:port`` and wait for the plugin's ``SC_ON_CONNECT_SYNC`` (id 5).

    On success the client sends ``C_SHUTDOWN`` while the plugin waits for the handshake's echo, so
    the plugin drops this client and listens again for the real one.
    """
    try:
        sock = socket.create_connection((host, port), timeout=min(timeout_s, 5.0))
    except OSError as exc:
        return PortReport(
            port,
            PortStatus.NOTHING_LISTENING,
            f"nothing accepts connections on {host}:{port} ({exc}). Is the game running? Was it "
            f'launched with /configstring="set custom_port {port}"? If the game console printed '
            '"Unknown variable: custom_port", the rulka_link plugin is not installed or not enabled: '
            "run `rulka tmi install`, then restart the game.",
        )
    with sock:
        sock.settimeout(timeout_s)
        try:
            raw = recv_exactly(sock, 4, message_id=None, expected="SC_ON_CONNECT_SYNC (id 5)")
        except TMInterfaceTimeout:
            return PortReport(
                port,
                PortStatus.NO_ON_CONNECT,
                f"the connection was accepted but no SC_ON_CONNECT_SYNC came within {timeout_s:.1f} s. "
                "Either another client is already connected to this game instance, the game is still "
                "starting up (wait for the menus), or the rulka_link plugin is not loaded (the console "
                'then says "Unknown variable: custom_port"). Run `rulka tmi install` and restart the game.',
            )
        except TMInterfaceError as exc:
            return PortReport(
                port,
                PortStatus.WRONG_PROTOCOL,
                f"the program on this port closed the connection without the rulka handshake ({exc.detail}). "
                "Another program may be using the port: choose another TMI_BASE_PORT.",
            )
        (message_id,) = struct.unpack("<i", raw)
        if message_id != MessageType.SC_ON_CONNECT_SYNC:
            return PortReport(
                port,
                PortStatus.WRONG_PROTOCOL,
                f"the program on this port sent {raw!r} instead of the handshake (int32 5): it does not "
                "speak the rulka protocol. Another program may be using the port: choose another "
                "TMI_BASE_PORT, or check that no other TMInterface plugin listens on it.",
            )
        try:
            sock.sendall(struct.pack("<i", MessageType.C_SHUTDOWN))
        except OSError:
            pass
    return PortReport(port, PortStatus.OK, "the rulka_link plugin answered the handshake; the link works.")
