"""Certificates and keys: a CA, serving certificates (the local control plane's
API server, the operator's metrics endpoint), client certificates and the
service-account signing key.

Every private key is written with mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ansible_operator.values.private_files import write_private

VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class KeyPair:
    cert_path: Path
    key_path: Path

    def cert_pem(self) -> bytes:
        return self.cert_path.read_bytes()

    def key_pem(self) -> bytes:
        return self.key_path.read_bytes()


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


MAX_COMMON_NAME = 64  # RFC 5280's ub-common-name


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)


def _ends(validity: datetime.timedelta) -> datetime.datetime:
    """Valid for `validity` from now: the start is set back (clock skew), not the end, so a
    certificate of seconds (in tests of renewals) is valid when made."""
    return datetime.datetime.now(datetime.UTC) + validity


def lacks_key_identifier(cert_path: Path) -> bool:
    """A certificate made before ours carried key identifiers, which Python
    3.13's strict verification refuses."""
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    except x509.ExtensionNotFound:
        return True
    return False


def create_ca(
    directory: Path,
    name: str = "ansible-operator-local-ca",
    validity: datetime.timedelta = VALIDITY,
) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_ends(validity))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        # Python 3.13's default TLS context verifies strictly (VERIFY_X509_STRICT):
        # a CA without a key identifier, or a certificate without its issuer's,
        # fails with "Missing Authority Key Identifier".
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pair = KeyPair(directory / "ca.crt", directory / "ca.key")
    pair.cert_path.parent.mkdir(parents=True, exist_ok=True)
    pair.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(pair.key_path, _key_pem(key))
    return pair


def _load_ca(ca: KeyPair) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(ca.cert_pem())
    key = serialization.load_pem_private_key(ca.key_pem(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return cert, key


def _issue(
    ca: KeyPair,
    directory: Path,
    stem: str,
    subject: x509.Name,
    usage: ExtendedKeyUsageOID,
    san: x509.SubjectAlternativeName | None = None,
    validity: datetime.timedelta = VALIDITY,
) -> KeyPair:
    ca_cert, ca_key = _load_ca(ca)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_ends(validity))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
    pair.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(pair.key_path, _key_pem(key))
    return pair


def issue_serving_cert(ca: KeyPair, directory: Path) -> KeyPair:
    """The API server's certificate, valid for the loopback names clients use."""
    san = x509.SubjectAlternativeName(
        [
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes"),
            x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
        ]
    )
    return _issue(
        ca, directory, "apiserver", _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, san
    )


def issue_server_cert(
    ca: KeyPair,
    directory: Path,
    stem: str,
    names: list[str],
    common_name: str,
    validity: datetime.timedelta = VALIDITY,
) -> KeyPair:
    """A serving certificate for `names` (DNS names or IP addresses), e.g. a
    webhook's Service names or the loopback address the API server calls."""
    entries: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    directory.mkdir(parents=True, exist_ok=True)
    san = x509.SubjectAlternativeName(entries)
    usage = ExtendedKeyUsageOID.SERVER_AUTH
    # X.509 caps a common name at 64 characters, which a Service's full name can pass
    # (<name>.<namespace>.svc); clients match the names above, the CN only labels it.
    if len(common_name) > MAX_COMMON_NAME:
        common_name = common_name.split(".", 1)[0][:MAX_COMMON_NAME]
    return _issue(ca, directory, stem, _name(common_name), usage, san, validity)


def issue_client_cert(
    ca: KeyPair, directory: Path, user: str, groups: tuple[str, ...] = ()
) -> KeyPair:
    """A client certificate: CN is the Kubernetes user name, O entries its groups."""
    stem = "client-" + "".join(c if c.isalnum() else "-" for c in user)
    return _issue(ca, directory, stem, _name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)


def create_service_account_key(directory: Path) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = directory / "sa.key"
    write_private(
        path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ),
    )
    return path
