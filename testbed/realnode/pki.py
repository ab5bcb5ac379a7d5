"""Throw-away certificates and kubeconfigs for one real-node run, made with the openssl command.

One CA signs everything: the API server's serving certificate, a client certificate per component (its
user and groups are what RBAC and the Node authorizer see) and the API server's client certificate for
the kubelet. The service-account key pair signs the tokens the driver runs under. Keys are EC P-256 (a
second apiece, not RSA's several).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

DAYS = "2"  # the run lasts minutes; a long validity buys nothing


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    folder: Path
    ca: KeyPair
    serving: KeyPair
    service_account_key: Path
    service_account_pub: Path

    def client(self, name: str) -> KeyPair:
        return KeyPair(self.folder / f"{name}.crt", self.folder / f"{name}.key")


def _run(openssl: Path, *args: str) -> None:
    subprocess.run([str(openssl), *args], check=True, capture_output=True, timeout=60)


def _key(openssl: Path, path: Path) -> None:
    _run(openssl, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path))


def _signed(openssl: Path, ca: KeyPair, folder: Path, name: str, subject: str, extensions: str) -> KeyPair:
    pair = KeyPair(folder / f"{name}.crt", folder / f"{name}.key")
    _key(openssl, pair.key)
    request = folder / f"{name}.csr"
    _run(openssl, "req", "-new", "-key", str(pair.key), "-subj", subject, "-out", str(request))
    ext = folder / f"{name}.ext"
    ext.write_text(extensions)
    _run(
        openssl, "x509", "-req", "-in", str(request), "-CA", str(ca.cert), "-CAkey", str(ca.key),
        "-CAcreateserial", "-days", DAYS, "-extfile", str(ext), "-out", str(pair.cert),
    )  # fmt: skip
    return pair


def make(openssl: Path, folder: Path, hostname: str, clients: dict[str, str]) -> Pki:
    """A CA, the API server's serving pair, one client pair per entry of `clients` (name -> subject such as
    "/O=system:masters/CN=admin") and the service-account key pair, all under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = KeyPair(folder / "ca.crt", folder / "ca.key")
    _key(openssl, ca.key)
    _run(
        openssl, "req", "-x509", "-new", "-key", str(ca.key), "-subj", "/CN=gpu-device-plugin-real-node-ca",
        "-days", DAYS, "-out", str(ca.cert),
    )  # fmt: skip
    names = ["localhost", hostname, "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
    san = ",".join([*(f"DNS:{n}" for n in names), "IP:127.0.0.1", "IP:10.96.0.1"])
    serving = _signed(
        openssl, ca, folder, "apiserver", "/CN=kube-apiserver",
        f"subjectAltName={san}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n",
    )  # fmt: skip
    for name, subject in clients.items():
        _signed(openssl, ca, folder, name, subject, "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n")
    sa_key, sa_pub = folder / "sa.key", folder / "sa.pub"
    _key(openssl, sa_key)
    _run(openssl, "ec", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))
    return Pki(folder, ca, serving, sa_key, sa_pub)


def write_kubeconfig(path: Path, server: str, ca: Path, user: dict[str, str]) -> Path:
    """A kubeconfig for one user: `user` is {client-certificate, client-key} or {token}."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "real-node", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "real-node", "context": {"cluster": "real-node", "user": "user"}}],
        "current-context": "real-node",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def client_kubeconfig(pki: Pki, name: str, server: str) -> Path:
    pair = pki.client(name)
    user = {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
    return write_kubeconfig(pki.folder / f"{name}.kubeconfig", server, pki.ca.cert, user)
