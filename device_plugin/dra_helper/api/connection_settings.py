"""Where and how to connect to the API server, as the `kubernetes` client's configuration says.

Boundary: pure reading of a client Configuration into what aiohttp needs (an SSL context and server
name, a proxy URL after the no_proxy rules); the connection itself is transport.py's.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from kubernetes import client as k8s


@dataclass(frozen=True)
class TlsSettings:
    context: ssl.SSLContext
    server_hostname: str | None  # the name the server's certificate must carry, when not the host's


def tls_settings(configuration: k8s.Configuration) -> TlsSettings:
    """The SSL context and server name the client's own urllib3 pool would use for this
    configuration."""
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert or None,
        cadata=getattr(configuration, "ca_cert_data", None) or None,
    )
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    assert_hostname = getattr(configuration, "assert_hostname", None)
    if not configuration.verify_ssl or assert_hostname is False:
        context.check_hostname = False
    if not configuration.verify_ssl:
        context.verify_mode = ssl.CERT_NONE
    name = getattr(configuration, "tls_server_name", None) or (
        assert_hostname if isinstance(assert_hostname, str) else None
    )
    return TlsSettings(context, name or None)


def proxy_for(configuration: k8s.Configuration) -> str:
    """The proxy URL to send requests through ("" for none), as the client's no_proxy rules say."""
    proxy = configuration.proxy or ""
    if proxy and bypasses_proxy(configuration.host, getattr(configuration, "no_proxy", None) or ""):
        return ""
    return proxy


def bypasses_proxy(url: str, no_proxy: str) -> bool:
    """Whether `url`'s host matches a no_proxy entry: '*', a host (with or without :port), a domain
    ('.example.com' or 'example.com' also covers its subdomains), or an IP network in CIDR form."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*" or entry == parts.netloc.lower() or entry == host:
            return True
        if "/" in entry:
            try:
                if ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        elif host.endswith("." + entry.lstrip(".")):
            return True
    return False
