"""``--ray-address`` of ``rulka -p`` (collectors) and ``rulka tune`` (trials): which Ray cluster to join."""
from __future__ import annotations

from rulka.validation import ConfigError


def parse_ray_address(address: str | None) -> str | None:
    """``--ray-address``: None / ``none`` (a local instance), ``auto`` or ``HOST:PORT``."""
    if address is None or address.lower() == "none":
        return None
    if address != "auto":
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"--ray-address {address!r}: give auto, HOST:PORT (e.g. 192.168.1.10:6379) or none")
    return address
