"""A local control plane's state directory made before certificates carried
key identifiers (which Python 3.13 refuses) gets new certificates at the next
start, and keeps its service-account key (tokens already issued stay valid)."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from old_certificates import cert_pem, issue, key_pem

from ansible_operator.cluster.local import LocalControlPlane
from ansible_operator.serving import pki


def old_style_ca(directory: Path) -> None:
    """A CA as our earlier versions made it: no SubjectKeyIdentifier."""
    cert, key = issue("old-ca", ca=True)
    directory.mkdir(parents=True)
    (directory / "ca.crt").write_bytes(cert_pem(cert))
    (directory / "ca.key").write_bytes(key_pem(key))


def test_old_certificates_are_made_again_and_the_service_account_key_kept(tmp_path: Path) -> None:
    plane = LocalControlPlane(tmp_path / "state")
    old_style_ca(plane.pki_dir)
    service_account_key = pki.create_service_account_key(plane.pki_dir).read_bytes()
    assert pki.lacks_key_identifier(plane.ca.cert_path)
    plane._write_pki()
    assert not pki.lacks_key_identifier(plane.ca.cert_path)
    assert (plane.pki_dir / "sa.key").read_bytes() == service_account_key
    ca = x509.load_pem_x509_certificate(plane.ca.cert_pem())
    for issued in plane.pki_dir.glob("*.crt"):
        cert = x509.load_pem_x509_certificate(issued.read_bytes())
        assert cert.issuer == ca.subject, issued.name
        cert.verify_directly_issued_by(ca)
    # A second start keeps what is current.
    before = plane.ca.cert_pem()
    plane._write_pki()
    assert plane.ca.cert_pem() == before
