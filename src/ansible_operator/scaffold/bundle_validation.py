"""Checks of a registry+v1 bundle directory, as OLM reads it.

The format checks operator-registry makes when it unpacks a bundle (annotations.yaml's
keys and values, one CSV, one object per file of a kind OLM installs, no folders or
hidden files under manifests/, the Dockerfile's labels), and the CSV checks of
operator-framework/api's validators that matter most (CSV name, semver version,
install strategy and modes, owned CRDs against the CRD files both ways, alm-examples
of owned kinds only, webhook definitions naming a Deployment of the CSV).
`tools/bundle-validate` runs operator-framework/api's own validators; its test runs both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.scaffold.bundle_csv import (
    CSV_API_VERSION,
    INSTALL_MODES,
    SUPPORTED_KINDS,
    WEBHOOK_KINDS,
)

MEDIATYPE = "registry+v1"
PREFIX = "operators.operatorframework.io.bundle."
ANNOTATION_KEYS = (
    f"{PREFIX}mediatype.v1",
    f"{PREFIX}manifests.v1",
    f"{PREFIX}metadata.v1",
    f"{PREFIX}package.v1",
    f"{PREFIX}channels.v1",
)
DEFAULT_CHANNEL_KEY = f"{PREFIX}channel.default.v1"
ANNOTATIONS_FILE = Path("metadata/annotations.yaml")
# semver 2.0.0, as blang/semver (OLM's) parses it.
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
)
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CHANNEL = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def validate_bundle(bundle: Path, dockerfile: Path | None = None) -> list[str]:
    """Every problem of the bundle in `bundle`, as `path: what is wrong`; none: valid."""
    problems: list[str] = []
    annotations = _annotations(bundle, problems)
    objects = _manifests(bundle, annotations, problems)
    csvs = [(path, doc) for path, doc in objects if doc.get("kind") == "ClusterServiceVersion"]
    if len(csvs) != 1:
        found = ", ".join(str(path) for path, _ in csvs) or "none"
        problems.append(
            f"{bundle / 'manifests'}: exactly one ClusterServiceVersion needed ({found})"
        )
    else:
        crds = [(p, d) for p, d in objects if d.get("kind") == "CustomResourceDefinition"]
        problems += _csv_problems(*csvs[0], crds)
    if dockerfile is not None:
        problems += _dockerfile_problems(dockerfile, annotations)
    return problems


def _load(path: Path, problems: list[str]) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        problems.append(f"{path}: cannot be read as YAML: {error}")
        return None


# -- metadata/annotations.yaml ----------------------------------------------------------


def _annotations(bundle: Path, problems: list[str]) -> dict[str, str]:
    path = bundle / ANNOTATIONS_FILE
    if not path.is_file():
        problems.append(f"{path}: missing (OLM reads the bundle's package and channels there)")
        return {}
    data = _load(path, problems) or {}
    annotations = data.get("annotations") if isinstance(data, dict) else None
    if not isinstance(annotations, dict):
        problems.append(f"{path}: needs a mapping `annotations:`")
        return {}
    annotations = {str(k): str(v) for k, v in annotations.items()}
    for key in ANNOTATION_KEYS:
        if not annotations.get(key):
            problems.append(f"{path}: annotations.{key} is missing")
    if annotations.get(ANNOTATION_KEYS[0], MEDIATYPE) != MEDIATYPE:
        problems.append(f"{path}: annotations.{ANNOTATION_KEYS[0]} must be {MEDIATYPE}")
    for key, folder in ((ANNOTATION_KEYS[1], "manifests"), (ANNOTATION_KEYS[2], "metadata")):
        value = annotations.get(key)
        if value and value.strip("/") != folder:
            problems.append(f"{path}: annotations.{key} is {value!r}, must be '{folder}/'")
    package = annotations.get(ANNOTATION_KEYS[3], "")
    if package and not DNS_LABEL.match(package):
        problems.append(f"{path}: package {package!r} is not a lower-case DNS label")
    channels = [c.strip() for c in annotations.get(ANNOTATION_KEYS[4], "").split(",")]
    for channel in channels:
        if annotations.get(ANNOTATION_KEYS[4]) and not CHANNEL.match(channel):
            problems.append(f"{path}: channel {channel!r} is not a valid channel name")
    default = annotations.get(DEFAULT_CHANNEL_KEY)
    if default is not None and default not in channels:
        problems.append(f"{path}: default channel {default!r} is not among channels {channels}")
    return annotations


# -- manifests/ -------------------------------------------------------------------------


def _manifests(
    bundle: Path, annotations: dict[str, str], problems: list[str]
) -> list[tuple[Path, dict[str, Any]]]:
    folder = bundle / "manifests"
    if not folder.is_dir():
        problems.append(f"{folder}: missing")
        return []
    objects = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            problems.append(f"{path}: hidden files are refused in manifests/")
            continue
        if path.is_dir():
            problems.append(f"{path}: manifests/ must hold files only")
            continue
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        except yaml.YAMLError as error:
            problems.append(f"{path}: not valid YAML: {error}")
            continue
        if len(docs) != 1 or not isinstance(docs[0], dict):
            problems.append(f"{path}: must hold exactly one object (OLM reads the first only)")
            continue
        kind = docs[0].get("kind")
        if kind not in {"ClusterServiceVersion", "CustomResourceDefinition", *SUPPORTED_KINDS}:
            problems.append(f"{path}: OLM does not install a {kind} from a bundle")
        objects.append((path, docs[0]))
    return objects


# -- the CSV ----------------------------------------------------------------------------


def _csv_problems(
    path: Path, csv: dict[str, Any], crds: list[tuple[Path, dict[str, Any]]]
) -> list[str]:
    problems: list[str] = []
    if csv.get("apiVersion") != CSV_API_VERSION:
        problems.append(f"{path}: apiVersion must be {CSV_API_VERSION}")
    name = str((csv.get("metadata") or {}).get("name") or "")
    if not DNS_SUBDOMAIN.match(name) or len(name) > 253:
        problems.append(f"{path}: metadata.name {name!r} is not a DNS subdomain")
    spec = csv.get("spec") or {}
    version = str(spec.get("version") or "")
    if not SEMVER.match(version):
        problems.append(f"{path}: spec.version {version!r} is not a semantic version (X.Y.Z)")
    min_kube = spec.get("minKubeVersion")
    if min_kube is not None and not SEMVER.match(str(min_kube)):
        problems.append(f"{path}: spec.minKubeVersion {min_kube!r} is not X.Y.Z")
    problems += _install_problems(path, spec)
    problems += _install_mode_problems(path, spec)
    provided = _owned_problems(path, spec, crds, problems)
    problems += _example_problems(path, csv, provided)
    return problems


def _install_problems(path: Path, spec: dict[str, Any]) -> list[str]:
    install = spec.get("install") or {}
    if install.get("strategy") != "deployment":
        return [f"{path}: spec.install.strategy must be 'deployment'"]
    problems = []
    details = install.get("spec") or {}
    deployments = details.get("deployments") or []
    if not deployments:
        problems.append(f"{path}: spec.install.spec.deployments is empty")
    names = set()
    for index, deployment in enumerate(deployments):
        where = f"{path}: spec.install.spec.deployments[{index}]"
        if not DNS_SUBDOMAIN.match(str(deployment.get("name") or "")):
            problems.append(f"{where}.name must be a DNS subdomain")
        names.add(deployment.get("name"))
        containers = (deployment.get("spec") or {}).get("template", {}).get("spec", {})
        if not containers.get("containers"):
            problems.append(f"{where}.spec.template.spec.containers is empty")
    for key in ("permissions", "clusterPermissions"):
        for index, permission in enumerate(details.get(key) or []):
            if not permission.get("serviceAccountName"):
                problems.append(f"{path}: spec.install.spec.{key}[{index}].serviceAccountName")
    kinds = set(WEBHOOK_KINDS.values()) | {"ConversionWebhook"}
    for index, webhook in enumerate(spec.get("webhookdefinitions") or []):
        where = f"{path}: spec.webhookdefinitions[{index}]"
        if webhook.get("deploymentName") not in names:
            problems.append(f"{where}.deploymentName names no Deployment of the CSV")
        if webhook.get("type") not in kinds:
            problems.append(f"{where}.type must be one of {sorted(kinds)}")
        if not webhook.get("generateName") or not webhook.get("admissionReviewVersions"):
            problems.append(f"{where}: generateName and admissionReviewVersions are required")
    return problems


def _install_mode_problems(path: Path, spec: dict[str, Any]) -> list[str]:
    modes = [m.get("type") for m in spec.get("installModes") or []]
    problems = []
    if sorted(modes) != sorted(INSTALL_MODES):
        problems.append(f"{path}: spec.installModes must list each of {', '.join(INSTALL_MODES)}")
    if not any(m.get("supported") for m in spec.get("installModes") or []):
        problems.append(f"{path}: spec.installModes: none is supported")
    return problems


def _owned_problems(
    path: Path,
    spec: dict[str, Any],
    crds: list[tuple[Path, dict[str, Any]]],
    problems: list[str],
) -> set[tuple[str, str, str]]:
    in_files = {}
    for crd_path, crd in crds:
        crd_spec = crd.get("spec") or {}
        for version in crd_spec.get("versions") or []:
            key = (
                crd_spec.get("group"),
                version.get("name"),
                crd_spec.get("names", {}).get("kind"),
            )
            in_files[key] = crd_path
    owned = set()
    for index, entry in enumerate(spec.get("customresourcedefinitions", {}).get("owned") or []):
        group = str(entry.get("name", "")).partition(".")[2]
        key = (group, entry.get("version"), entry.get("kind"))
        owned.add(key)
        for field in ("name", "version", "kind", "displayName", "description"):
            if not entry.get(field):
                problems.append(f"{path}: customresourcedefinitions.owned[{index}].{field}")
        if key not in in_files:
            problems.append(
                f"{path}: owned CRD {entry.get('name')} {entry.get('version')} "
                f"{entry.get('kind')} has no CRD file in manifests/"
            )
    owned_kinds = {(g, k) for g, _, k in owned}
    for key, crd_path in in_files.items():
        if (key[0], key[2]) not in owned_kinds:
            problems.append(f"{crd_path}: {key[2]}.{key[0]} is not owned by the CSV")
    return owned


def _example_problems(
    path: Path, csv: dict[str, Any], provided: set[tuple[str, str, str]]
) -> list[str]:
    text = (csv.get("metadata") or {}).get("annotations", {}).get("alm-examples")
    if text is None:
        return []
    try:
        examples = json.loads(text)
    except json.JSONDecodeError as error:
        return [f"{path}: metadata.annotations.alm-examples is not JSON: {error}"]
    if not isinstance(examples, list):
        return [f"{path}: metadata.annotations.alm-examples must be a JSON list"]
    problems = []
    for example in examples:
        group, _, version = str(example.get("apiVersion", "")).rpartition("/")
        if (group, version, example.get("kind")) not in provided:
            problems.append(
                f"{path}: alm-examples: {example.get('apiVersion')} {example.get('kind')} "
                "is not a kind the CSV owns"
            )
    return problems


# -- bundle.Dockerfile ------------------------------------------------------------------


def _dockerfile_problems(path: Path, annotations: dict[str, str]) -> list[str]:
    if not path.is_file():
        return [f"{path}: missing"]
    labels = dict(
        re.findall(r"^LABEL\s+(\S+?)=(\S+)\s*$", path.read_text(encoding="utf-8"), re.MULTILINE)
    )
    return [
        f"{path}: LABEL {key}={labels.get(key)!r} differs from annotations.yaml's {value!r}"
        for key, value in annotations.items()
        if key.startswith(PREFIX) and labels.get(key) != value
    ]
