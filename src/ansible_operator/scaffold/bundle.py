"""`ansible-operator bundle`: an OLM registry+v1 bundle of a project.

Writes, from the project's config/ (bundle_sources.py says which files) and the
webhooks of its watches.yaml:

    bundle/manifests/<package>.clusterserviceversion.yaml   (bundle_csv.py)
    bundle/manifests/<group>_<plural>.yaml                  each CRD
    bundle/manifests/<name>_<group>_<version>_<kind>.yaml   the other objects OLM installs
    bundle/metadata/annotations.yaml                        package, channels, media type
    bundle.Dockerfile                                       the bundle image, same labels

then checks the result (bundle_validation.py). manifests/ and metadata/ are written
anew each time, so a kind or file removed from config/ leaves the bundle too.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.scaffold.bundle_csv import (
    WEBHOOK_KINDS,
    CsvRequest,
    build_csv,
)
from ansible_operator.scaffold.bundle_sources import BundleError, Manifest, read_manifests
from ansible_operator.scaffold.bundle_validation import (
    ANNOTATION_KEYS,
    ANNOTATIONS_FILE,
    CHANNEL,
    DEFAULT_CHANNEL_KEY,
    DNS_LABEL,
    MEDIATYPE,
    SEMVER,
    validate_bundle,
)

DOCKERFILE = "bundle.Dockerfile"
BASES = Path("config/manifests/bases")


@dataclass(frozen=True)
class BundleOptions:
    version: str = "0.0.1"
    channels: tuple[str, ...] = ("alpha",)
    default_channel: str | None = None  # the first channel
    image: str | None = None  # the operator's image in the CSV (default: manager.yaml's)
    output: Path | None = None  # default: <project>/bundle
    package: str | None = None  # default: PROJECT's projectName
    manifests: str | None = None  # a rendered file ('-': stdin) instead of config/


@dataclass
class BundleResult:
    directory: Path
    dockerfile: Path
    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def add_bundle_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, default=Path(), help="project directory (default: .)")
    parser.add_argument(
        "--version", default="0.0.1", help="the bundle's semantic version X.Y.Z (default: 0.0.1)"
    )
    parser.add_argument(
        "--channels", default="alpha", help="comma list of OLM channels (default: alpha)"
    )
    parser.add_argument("--default-channel", help="the package's default channel (default: first)")
    parser.add_argument(
        "--image", help="the operator's image in the CSV (default: config/manager's)"
    )
    parser.add_argument(
        "--output", type=Path, help="the bundle's directory (default: PROJECT/bundle)"
    )
    parser.add_argument("--package", help="OLM package name (default: PROJECT's projectName)")
    parser.add_argument(
        "--manifests",
        metavar="FILE",
        help="read these rendered manifests ('-': stdin, e.g. from `kubectl kustomize "
        "config/default`) instead of config/",
    )


def image_problem(image: str) -> str | None:
    """Why a bundle may not name `image`, if it may not: OLM installs it in
    clusters that pull it, so it needs a registry, and a version tag or a
    digest (`:latest`, or no tag, is whatever was pushed last)."""
    name, _, digest = image.partition("@")
    first, slash, rest = name.partition("/")
    registry = slash and ("." in first or ":" in first or first == "localhost")
    last = (rest if slash else first).rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    missing = []
    if not registry:
        missing.append("a registry")
    if not digest and tag in ("", "latest"):
        missing.append("a version tag or a digest, not `:latest`")
    if not missing:
        return None
    return (
        f"--image {image}: an OLM bundle's image is pulled by the clusters that install it, "
        f"so it needs {' and '.join(missing)} (e.g. quay.io/example/{last.partition(':')[0]}"
        ":v0.1.0; with make: make bundle IMG=...)"
    )


def bundle_command(args: argparse.Namespace) -> int:
    problem = image_problem(args.image) if args.image else None
    if problem is not None:
        print(f"ansible-operator: {problem}", file=sys.stderr)
        return 2
    options = BundleOptions(
        version=args.version,
        channels=tuple(c.strip() for c in args.channels.split(",") if c.strip()),
        default_channel=args.default_channel,
        image=args.image,
        output=args.output,
        package=args.package,
        manifests=args.manifests,
    )
    try:
        result = write_bundle(args.dir, options)
    except BundleError as error:
        print(f"ansible-operator: {error}", file=sys.stderr)
        return 2
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    problems = validate_bundle(result.directory, result.dockerfile)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"bundle valid: {result.directory} ({len(result.files)} files), {result.dockerfile}")
    return 0


def write_bundle(project: Path, options: BundleOptions) -> BundleResult:
    """Write the bundle of `project`; raise BundleError for what prevents it."""
    project = Path(project)
    package, layout = _package(project, options.package)
    channels, default = _channels(options)
    if not SEMVER.match(options.version):
        raise BundleError(f"--version {options.version!r} must be a semantic version (X.Y.Z)")
    manifests = read_manifests(project, options.manifests)
    request = CsvRequest(package, options.version, options.image, layout, _base(project, package))
    result = build_csv(request, manifests, _watches_webhooks(project, manifests))
    output = options.output or project / "bundle"
    written = BundleResult(output, output.parent / DOCKERFILE, warnings=result.warnings)
    for folder in ("manifests", "metadata"):
        shutil.rmtree(output / folder, ignore_errors=True)
        (output / folder).mkdir(parents=True)
    files = {f"{package}.clusterserviceversion.yaml": result.csv}
    files.update({_crd_file(m): m.doc for m in result.crds})
    files.update({_object_file(m): m.doc for m in result.others})
    for name, doc in files.items():
        written.files.append(_write_yaml(output / "manifests" / name, doc))
    annotations = _annotations(package, channels, default)
    written.files.append(_write_yaml(output / ANNOTATIONS_FILE, {"annotations": annotations}))
    written.dockerfile.write_text(_dockerfile(annotations, output.name), encoding="utf-8")
    return written


# -- what the bundle is called ----------------------------------------------------------


def _package(project: Path, package: str | None) -> tuple[str, str]:
    """The package name and the project's layout, from PROJECT (as `init` writes it)."""
    data: dict[str, Any] = {}
    path = project / "PROJECT"
    if path.is_file():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as error:
            raise BundleError(f"{path}: not valid YAML: {error}") from None
    name = package or str(data.get("projectName") or "")
    if not name:
        raise BundleError(f"{project}: no PROJECT file with a projectName: pass --package NAME")
    if not DNS_LABEL.match(name) or len(name) > 63:
        raise BundleError(f"package name {name!r} must be a lower-case DNS label (--package)")
    return name, str(data.get("layout") or "ansible-operator/v1")


def _channels(options: BundleOptions) -> tuple[list[str], str]:
    channels = list(options.channels)
    if not channels:
        raise BundleError("--channels is empty: name at least one channel (e.g. alpha)")
    for channel in channels:
        if not CHANNEL.match(channel):
            raise BundleError(f"--channels: {channel!r} is not a valid channel name")
    default = options.default_channel or channels[0]
    if default not in channels:
        raise BundleError(f"--default-channel {default!r} is not one of --channels {channels}")
    return channels, default


def _base(project: Path, package: str) -> dict[str, Any]:
    """The base CSV with what config/ cannot say (bundle_csv.py's docstring)."""
    path = project / BASES / f"{package}.clusterserviceversion.yaml"
    if not path.is_file():
        return {}
    try:
        base = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise BundleError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(base, dict):
        raise BundleError(f"{path}: not a ClusterServiceVersion (a YAML mapping)")
    return base


def _watches_webhooks(project: Path, manifests: list[Manifest]) -> list[Manifest]:
    """watches.yaml's `- webhook:` entries, as the configurations the operator would apply
    (unless the project ships its own configurations)."""
    path = project / "watches.yaml"
    if not path.is_file() or any(m.kind in WEBHOOK_KINDS for m in manifests):
        return []
    from ansible_operator.project.watches import WatchesError, load_watches_file
    from ansible_operator.webhooks.configurations import Endpoint, by_kind, configuration

    try:
        webhooks = load_watches_file(path, cwd=project).webhooks
    except WatchesError as error:
        raise BundleError(f"{error}\n(the bundle's webhooks are read from {path})") from None
    # OLM's Service for a webhook listens on 443 and forwards to targetPort.
    endpoint = Endpoint(service=("placeholder", "webhook-service", 443))
    return [
        Manifest(configuration(resource, "webhooks", listed, endpoint, None), "watches.yaml")
        for resource, listed in by_kind(webhooks).items()
        if listed
    ]


# -- files ------------------------------------------------------------------------------


def _crd_file(manifest: Manifest) -> str:
    spec = manifest.doc.get("spec") or {}
    return f"{spec.get('group')}_{(spec.get('names') or {}).get('plural')}.yaml"


def _object_file(manifest: Manifest) -> str:
    group, _, version = manifest.api_version.rpartition("/")
    parts = [manifest.name, group, version, manifest.kind.lower()]
    return "_".join(part for part in parts if part) + ".yaml"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (alm-examples' JSON) as `|` blocks, readable in review."""


def _block_strings(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _block_strings)


def _write_yaml(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100)
    path.write_text(text, encoding="utf-8")
    return path


def _annotations(package: str, channels: list[str], default: str) -> dict[str, str]:
    mediatype, manifests, metadata, package_key, channels_key = ANNOTATION_KEYS
    return {
        mediatype: MEDIATYPE,
        manifests: "manifests/",
        metadata: "metadata/",
        package_key: package,
        channels_key: ",".join(channels),
        DEFAULT_CHANNEL_KEY: default,
    }


def _dockerfile(annotations: dict[str, str], folder: str) -> str:
    labels = "".join(f"LABEL {key}={value}\n" for key, value in annotations.items())
    return (
        "# The OLM bundle image of this operator, written by `ansible-operator bundle`.\n"
        f"FROM scratch\n\n{labels}\n"
        f"COPY {folder}/manifests /manifests/\n"
        f"COPY {folder}/metadata /metadata/\n"
    )
