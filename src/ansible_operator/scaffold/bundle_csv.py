"""The ClusterServiceVersion of a bundle, made from the project's manifests.

What goes where, as Operator SDK's `generate bundle` does:

- Deployments -> `spec.install.spec.deployments` (OLM creates them in the
  namespace it installs into; their ServiceAccounts are created by OLM too);
- a ClusterRole bound to a Deployment's ServiceAccount by a ClusterRoleBinding ->
  `clusterPermissions`; a Role (or ClusterRole) bound by a RoleBinding ->
  `permissions`; the bindings are dropped (OLM binds), a role nobody else is
  bound to is dropped too;
- each CRD version -> `customresourcedefinitions.owned`, objects of the owned kinds
  (the samples) -> the `alm-examples` annotation;
- Mutating/ValidatingWebhookConfigurations and watches.yaml's `- webhook:` entries ->
  `webhookdefinitions` (OLM makes the configurations, the Service and the serving
  certificate, mounted where `--webhook-cert-dir` reads it);
- Namespaces are dropped; objects of the kinds a registry+v1 bundle may carry are
  kept as files beside the CSV; the rest is skipped with a warning.

A base CSV at `config/manifests/bases/<package>.clusterserviceversion.yaml` (Operator
SDK's place for it) gives what cannot be derived: displayName, description, icon,
maintainers, provider, links, keywords, installModes, minKubeVersion, and per owned
CRD its displayName, description and descriptors.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ansible_operator import __version__
from ansible_operator.scaffold.bundle_sources import BundleError, Manifest

CSV_API_VERSION = "operators.coreos.com/v1alpha1"
INSTALL_MODES = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
# A default only: a base CSV's spec.minKubeVersion says what the project's roles need.
MIN_KUBE_VERSION = "1.25.0"
# Where OLM mounts the serving certificate it issues for a CSV's webhooks (tls.crt, tls.key).
OLM_WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
WEBHOOK_PORT = 9443  # --webhook-bind-address's default
# What a registry+v1 bundle may carry beside the CSV and the CRDs (OLM installs these).
SUPPORTED_KINDS = {
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsoleQuickStart",
    "ConsoleYAMLSample",
    "PodDisruptionBudget",
    "PriorityClass",
    "PrometheusRule",
    "Role",
    "RoleBinding",
    "Secret",
    "Service",
    "ServiceAccount",
    "ServiceMonitor",
    "VerticalPodAutoscaler",
}
WEBHOOK_KINDS = {
    "MutatingWebhookConfiguration": "MutatingAdmissionWebhook",
    "ValidatingWebhookConfiguration": "ValidatingAdmissionWebhook",
}
# Made by OLM for a bundle with webhooks; the project's own would clash with it.
WEBHOOK_SERVICE_SUFFIX = "-webhook-service"


@dataclass(frozen=True)
class CsvRequest:
    package: str
    version: str
    image: str | None = None
    layout: str = "ansible-operator/v1"
    base: dict[str, Any] = field(default_factory=dict)


@dataclass
class CsvResult:
    csv: dict[str, Any]
    crds: list[Manifest]
    others: list[Manifest]  # written beside the CSV
    warnings: list[str]


def build_csv(
    request: CsvRequest, manifests: list[Manifest], webhooks: list[Manifest]
) -> CsvResult:
    """The CSV and the files beside it. `webhooks`: Mutating/ValidatingWebhookConfigurations
    made from watches.yaml (the project's own are among `manifests`)."""
    warnings: list[str] = []
    crds = [m for m in manifests if m.kind == "CustomResourceDefinition"]
    owned = _owned(crds, request.base)
    owned_kinds = {
        (entry["name"].split(".", 1)[1], entry["version"], entry["kind"]) for entry in owned
    }
    examples = [m for m in manifests if _gvk(m) in owned_kinds]
    deployments = [m for m in manifests if m.kind == "Deployment"]
    if not deployments:
        raise _no_deployment(manifests)
    configurations = [m for m in [*manifests, *webhooks] if m.kind in WEBHOOK_KINDS]
    definitions = _webhook_definitions(configurations, deployments[0], warnings)
    rbac = _Rbac(deployments, manifests)
    install = {
        "strategy": "deployment",
        "spec": {
            "deployments": [
                _install_deployment(m, request.image, bool(definitions)) for m in deployments
            ],
            "permissions": rbac.permissions(namespaced=True),
            "clusterPermissions": rbac.permissions(namespaced=False),
        },
    }
    taken = {id(m) for m in [*crds, *examples, *deployments, *configurations, *rbac.absorbed]}
    rest = [m for m in manifests if id(m) not in taken and not rbac.creates(m)]
    others = _beside_csv(rest, bool(definitions), warnings)
    csv = _csv(request, owned, examples, install, definitions)
    return CsvResult(csv, crds, others, warnings)


def _beside_csv(manifests: list[Manifest], webhooks: bool, warnings: list[str]) -> list[Manifest]:
    """What the CSV does not hold and OLM installs from a bundle (without namespaces)."""
    kept = []
    for manifest in manifests:
        if manifest.kind == "Namespace" or (webhooks and _is_webhook_service(manifest)):
            continue
        if manifest.sample:
            warnings.append(
                f"{manifest.describe()}: left out, a sample of a kind the bundle does not own"
            )
        elif manifest.kind not in SUPPORTED_KINDS:
            warnings.append(
                f"{manifest.describe()}: skipped, a registry+v1 bundle cannot carry a "
                f"{manifest.kind} (OLM installs only {', '.join(sorted(SUPPORTED_KINDS))})"
            )
        else:
            kept.append(Manifest(_without_namespace(manifest.doc), manifest.source))
    return kept


def _no_deployment(manifests: list[Manifest]) -> BundleError:
    sources = sorted({m.source for m in manifests}) or ["nothing"]
    return BundleError(
        "no Deployment among the manifests read "
        f"({', '.join(sources[:6])}{', ...' if len(sources) > 6 else ''}): "
        "the CSV installs the operator's Deployment (config/manager/manager.yaml)"
    )


def _gvk(manifest: Manifest) -> tuple[str, str, str]:
    group, _, version = manifest.api_version.rpartition("/")
    return group, version, manifest.kind


def display_name(text: str) -> str:
    """`HarborServerConfiguration` -> `Harbor Server Configuration`, `memcached-operator`
    -> `Memcached Operator`."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text).replace("-", " ").split()
    return " ".join(word[:1].upper() + word[1:] for word in words)


# -- CRDs and examples ------------------------------------------------------------------


def _owned(crds: list[Manifest], base: dict[str, Any]) -> list[dict[str, Any]]:
    described = {
        (entry.get("name"), entry.get("version")): entry
        for entry in (base.get("spec", {}).get("customresourcedefinitions", {}).get("owned") or [])
        if isinstance(entry, dict)
    }
    owned = []
    for crd in crds:
        spec = crd.doc.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind", "")
        for version in spec.get("versions") or []:
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
            entry = {
                "name": crd.name,
                "version": version.get("name", ""),
                "kind": kind,
                "displayName": display_name(kind),
                "description": schema.get("description") or f"{display_name(kind)} objects.",
            }
            entry.update(described.get((crd.name, entry["version"]), {}))
            owned.append(entry)
    return owned


def _without_namespace(doc: dict[str, Any]) -> dict[str, Any]:
    """OLM puts namespaced objects into the namespace it installs into."""
    doc = copy.deepcopy(doc)
    (doc.get("metadata") or {}).pop("namespace", None)
    return doc


# -- the Deployment ---------------------------------------------------------------------


def _manager_container(spec: dict[str, Any]) -> dict[str, Any] | None:
    containers = spec.get("template", {}).get("spec", {}).get("containers") or []
    named = [c for c in containers if c.get("name") == "manager"]
    return (named or containers or [None])[0]


def _install_deployment(manifest: Manifest, image: str | None, webhooks: bool) -> dict[str, Any]:
    spec = copy.deepcopy(manifest.doc.get("spec") or {})
    container = _manager_container(spec)
    if container is not None:
        if image:
            container["image"] = image
        _watch_target_namespaces(container)
        if webhooks:
            _serve_olm_certificate(container)
    metadata = manifest.doc.get("metadata") or {}
    deployment: dict[str, Any] = {"name": metadata.get("name", ""), "spec": spec}
    if metadata.get("labels"):
        deployment["label"] = dict(metadata["labels"])
    return deployment


def _watch_target_namespaces(container: dict[str, Any]) -> None:
    """OLM writes the namespaces an install serves (empty: all) in this annotation of
    the Pod; WATCH_NAMESPACE takes the same comma list."""
    env = [e for e in container.get("env") or [] if e.get("name") != "WATCH_NAMESPACE"]
    target = {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}
    container["env"] = [{"name": "WATCH_NAMESPACE", "valueFrom": target}, *env]


def _serve_olm_certificate(container: dict[str, Any]) -> None:
    """OLM makes the webhook configurations and the certificate: the operator serves it
    and leaves the configurations alone."""
    args = [
        a
        for a in container.get("args") or []
        if not str(a).startswith(("--webhook-cert-dir", "--webhook-manage-configurations"))
    ]
    args += [f"--webhook-cert-dir={OLM_WEBHOOK_CERT_DIR}", "--webhook-manage-configurations=false"]
    container["args"] = args


def _webhook_port(deployment: Manifest) -> int:
    container = _manager_container(deployment.doc.get("spec") or {}) or {}
    for arg in container.get("args") or []:
        match = re.fullmatch(r"--webhook-bind-address=.*:(\d+)", str(arg))
        if match:
            return int(match.group(1))
    return WEBHOOK_PORT


# -- webhooks ---------------------------------------------------------------------------


def _webhook_definitions(
    configurations: list[Manifest], deployment: Manifest, warnings: list[str]
) -> list[dict[str, Any]]:
    definitions = []
    for configuration in configurations:
        for webhook in configuration.doc.get("webhooks") or []:
            definitions.append(
                _definition(configuration, webhook, deployment.name, _webhook_port(deployment))
            )
            if webhook.get("namespaceSelector"):
                warnings.append(
                    f"{configuration.source}: webhook {webhook.get('name')}: namespaceSelector "
                    "dropped, OLM sends the namespaces of the install's OperatorGroup "
                    "(a CSV's webhookdefinitions have no namespaceSelector)"
                )
    return definitions


def _definition(
    configuration: Manifest, webhook: dict[str, Any], deployment: str, target_port: int
) -> dict[str, Any]:
    service = (webhook.get("clientConfig") or {}).get("service") or {}
    definition: dict[str, Any] = {
        "type": WEBHOOK_KINDS[configuration.kind],
        "generateName": webhook.get("name", ""),
        "deploymentName": deployment,
        "containerPort": int(service.get("port") or 443),
        "targetPort": target_port,
        "webhookPath": service.get("path") or "/",
        "admissionReviewVersions": list(webhook.get("admissionReviewVersions") or ["v1"]),
        "sideEffects": webhook.get("sideEffects", "None"),
        "rules": copy.deepcopy(webhook.get("rules") or []),
    }
    for key in ("failurePolicy", "matchPolicy", "timeoutSeconds", "objectSelector"):
        if webhook.get(key) not in (None, {}):
            definition[key] = copy.deepcopy(webhook[key])
    if configuration.kind == "MutatingWebhookConfiguration" and webhook.get("reinvocationPolicy"):
        definition["reinvocationPolicy"] = webhook["reinvocationPolicy"]
    return definition


def _is_webhook_service(manifest: Manifest) -> bool:
    return manifest.kind == "Service" and manifest.name.endswith(WEBHOOK_SERVICE_SUFFIX)


# -- RBAC -------------------------------------------------------------------------------


class _Rbac:
    """Which roles the Deployments' ServiceAccounts are bound to, read as OLM's
    permissions (namespaced, in the install namespace) and clusterPermissions."""

    def __init__(self, deployments: list[Manifest], manifests: list[Manifest]) -> None:
        self.accounts = {
            (d.doc.get("spec") or {}).get("template", {}).get("spec", {}).get("serviceAccountName")
            or "default"
            for d in deployments
        }
        self.roles = {(m.kind, m.name): m for m in manifests if m.kind in ("Role", "ClusterRole")}
        self.bindings = [m for m in manifests if m.kind in ("RoleBinding", "ClusterRoleBinding")]
        self.manifests = manifests
        self.absorbed: list[Manifest] = []  # bindings and roles the CSV replaces
        self._rules: dict[tuple[bool, str], list[Any]] = {}
        self._read()

    def _read(self) -> None:
        used: dict[tuple[str, str], bool] = {}  # role -> only bound to our accounts
        for binding in self.bindings:
            ref = binding.doc.get("roleRef") or {}
            key = (str(ref.get("kind")), str(ref.get("name")))
            ours = [s for s in binding.doc.get("subjects") or [] if self._ours(s)]
            if not ours or key not in self.roles:
                used[key] = False
                continue
            # Bound to others too: the role and the binding stay for them.
            if len(ours) < len(binding.doc.get("subjects") or []):
                used[key] = False
            else:
                used.setdefault(key, True)
                self.absorbed.append(binding)
            namespaced = binding.kind == "RoleBinding"
            for subject in ours:
                rules = self._rules.setdefault((namespaced, subject["name"]), [])
                rules += copy.deepcopy(self.roles[key].doc.get("rules") or [])
        self.absorbed += [self.roles[key] for key, only_ours in used.items() if only_ours]

    def _ours(self, subject: Any) -> bool:
        return (
            isinstance(subject, dict)
            and subject.get("kind") == "ServiceAccount"
            and subject.get("name") in self.accounts
        )

    def creates(self, manifest: Manifest) -> bool:
        """OLM creates the Deployments' ServiceAccounts itself."""
        return manifest.kind == "ServiceAccount" and manifest.name in self.accounts

    def permissions(self, *, namespaced: bool) -> list[dict[str, Any]]:
        return [
            {"serviceAccountName": account, "rules": rules}
            for (is_namespaced, account), rules in sorted(self._rules.items())
            if is_namespaced == namespaced
        ]


# -- the CSV ----------------------------------------------------------------------------


def _install_modes(base: dict[str, Any], webhooks: bool) -> list[dict[str, Any]]:
    if base.get("spec", {}).get("installModes"):
        return copy.deepcopy(base["spec"]["installModes"])
    # WATCH_NAMESPACE follows OLM's target namespaces, so every mode works; OLM
    # installs a CSV with webhooks in AllNamespaces mode only.
    return [
        {"type": mode, "supported": not webhooks or mode == "AllNamespaces"}
        for mode in INSTALL_MODES
    ]


def _csv(
    request: CsvRequest,
    owned: list[dict[str, Any]],
    examples: Iterable[Manifest],
    install: dict[str, Any],
    definitions: list[dict[str, Any]],
) -> dict[str, Any]:
    base = copy.deepcopy(request.base)
    base_spec = base.get("spec") or {}
    container = _manager_container(install["spec"]["deployments"][0]["spec"]) or {}
    annotations = {
        "alm-examples": json.dumps([_without_namespace(m.doc) for m in examples], indent=2),
        "capabilities": "Basic Install",
        "operators.operatorframework.io/builder": f"ansible-operator-v{__version__}",
        "operators.operatorframework.io/project_layout": request.layout,
    }
    if container.get("image"):
        annotations["containerImage"] = container["image"]
    annotations.update((base.get("metadata") or {}).get("annotations") or {})
    spec: dict[str, Any] = {
        "displayName": display_name(request.package),
        "description": f"{display_name(request.package)}: an operator whose reconcile logic "
        "is Ansible roles, run by ansible-operator.",
        "provider": {"name": request.package},
        "maturity": "alpha",
        "minKubeVersion": MIN_KUBE_VERSION,
        **base_spec,
        "version": request.version,
        "install": install,
        "installModes": _install_modes(base, bool(definitions)),
        "customresourcedefinitions": {"owned": owned},
    }
    if definitions:
        spec["webhookdefinitions"] = definitions
    else:
        spec.pop("webhookdefinitions", None)
    return {
        "apiVersion": CSV_API_VERSION,
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": f"{request.package}.v{request.version}",
            "namespace": "placeholder",  # OLM sets the namespace; Operator SDK writes this
            "annotations": annotations,
        },
        "spec": spec,
    }
