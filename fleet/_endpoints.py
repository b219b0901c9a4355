"""Internal: parsing of "ip:port" endpoints, shared by the role makers, the launcher and the
collective runtime."""

from __future__ import annotations

from fleet.errors import InvalidArgument


def parse_endpoint(text: str, what: str) -> tuple[str, int]:
    """Splits "host:port" (IPv6 hosts in brackets: "[::1]:6170"); `what` names the source in
    errors, e.g. "--servers"."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not sep or not host or not 0 < port < 65536:
        raise InvalidArgument(
            f"bad endpoint {text!r} in {what}: expected ip:port with a port in "
            "1..65535, e.g. 127.0.0.1:6170"
        )
    return host, port


def parse_endpoint_list(text: str, what: str) -> list[str]:
    """Splits a comma-separated endpoint list, checking each entry and rejecting duplicates."""
    endpoints = [e.strip() for e in text.split(",") if e.strip()]
    for endpoint in endpoints:
        parse_endpoint(endpoint, what)
    duplicates = sorted({e for e in endpoints if endpoints.count(e) > 1})
    if duplicates:
        raise InvalidArgument(f"{what} lists {', '.join(duplicates)} more than once")
    return endpoints


def format_endpoint(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
