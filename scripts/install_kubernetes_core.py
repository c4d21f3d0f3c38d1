"""Install the kubernetes.core collection into the current environment.

PyPI's `ansible` package carries kubernetes.core, but installing it brings
~400 MB of unrelated collections. This script downloads the wheel of the
`ansible` release pinned in constraints.txt (no dependencies, no install) and
extracts only `ansible_collections/kubernetes/core` into site-packages, where
ansible-core's collection finder discovers it without any configuration.
Galaxy is not reachable from our machines; PyPI is.

Usage: python scripts/install_kubernetes_core.py [--constraints FILE] [--target DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

COLLECTION_PREFIX = "ansible_collections/kubernetes/core/"
ROOT = Path(__file__).resolve().parent.parent


def pinned_ansible_version(constraints: Path) -> str:
    for line in constraints.read_text().splitlines():
        match = re.fullmatch(r"\s*ansible==([\w.]+)\s*(#.*)?", line)
        if match:
            return match.group(1)
    raise SystemExit(f"{constraints}: no 'ansible==X.Y.Z' pin to take kubernetes.core from")


def installed_version(target: Path) -> str | None:
    manifest = target / "ansible_collections/kubernetes/core/MANIFEST.json"
    if not manifest.exists():
        return None
    marker = target / "ansible_collections/kubernetes/core/.from-ansible"
    return marker.read_text().strip() if marker.exists() else None


def install(version: str, target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--dest",
                tmp,
                f"ansible=={version}",
            ],
            check=True,
        )
        wheel = next(Path(tmp).glob("ansible-*.whl"))
        destination = target / COLLECTION_PREFIX
        if destination.exists():
            shutil.rmtree(destination)
        with zipfile.ZipFile(wheel) as archive:
            members = [n for n in archive.namelist() if n.startswith(COLLECTION_PREFIX)]
            if not members:
                raise SystemExit(f"{wheel.name} does not contain {COLLECTION_PREFIX}")
            archive.extractall(target, members)
    (destination / ".from-ansible").write_text(version + "\n")
    manifest = json.loads((destination / "MANIFEST.json").read_text())
    collection = manifest["collection_info"]["version"]
    print(f"installed kubernetes.core {collection} (from ansible {version}) into {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--constraints", type=Path, default=ROOT / "constraints.txt")
    parser.add_argument("--target", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    args = parser.parse_args()
    version = pinned_ansible_version(args.constraints)
    if installed_version(args.target) == version:
        print(f"kubernetes.core from ansible {version} already installed in {args.target}")
        return
    install(version, args.target)


if __name__ == "__main__":
    main()
