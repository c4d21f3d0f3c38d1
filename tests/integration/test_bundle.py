"""`ansible-operator bundle`: the OLM registry+v1 bundle of a generated project (and of
this repository) passes operator-framework/api's own validators (tools/bundle-validate,
built here with Go) and our format checks, and what OLM would create from it (the CRDs,
the Deployment, the RBAC, the webhook configuration) is admitted by a real API server
in a server-side dry run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ansible_operator.scaffold.bundle import BundleOptions, BundleResult, write_bundle
from ansible_operator.scaffold.bundle_sources import BundleError
from ansible_operator.scaffold.bundle_validation import validate_bundle
from ansible_operator.testing.manifests import apply_manifests, documents
from go_tools import built

REPO = Path(__file__).resolve().parents[2]
DOMAIN = "bundle.ansible-operator.test"
IMAGE = "registry.example.com/memcached-operator:v0.1.0"
WEBHOOK = """\
- webhook:
    name: size.cache.bundle.ansible-operator.test
    type: validating
    rules:
      - apiGroups: [cache.bundle.ansible-operator.test]
        apiVersions: [v1alpha1]
        resources: [memcacheds]
        operations: [CREATE, UPDATE]
    role: memcached
    failurePolicy: Fail
    timeoutSeconds: 5
"""


def cli(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ansible_operator.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def validator() -> Path:
    """tools/bundle-validate, built once per version of its sources."""
    return built("bundle-validate")


def olm_validate(validator: Path, bundle: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(validator), str(bundle)], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bundle") / "memcached-operator"
    cli("init", "--domain", DOMAIN, "--dir", str(path))
    cli("create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached",
        "--generate-role", "--dir", str(path))  # fmt: skip
    # The scaffold writes no webhook yet: add one as a user would.
    with (path / "watches.yaml").open("a", encoding="utf-8") as watches:
        watches.write(WEBHOOK)
    return path


@pytest.fixture(scope="module")
def bundle(project: Path) -> BundleResult:
    options = BundleOptions(
        version="0.1.0", channels=("alpha", "stable"), default_channel="stable", image=IMAGE
    )
    return write_bundle(project, options)


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def csv_of(bundle: BundleResult) -> dict[str, Any]:
    return load(bundle.directory / "manifests" / "memcached-operator.clusterserviceversion.yaml")


def test_bundle_of_a_generated_project_passes_olm_validation(
    bundle: BundleResult, validator: Path
) -> None:
    done = olm_validate(validator, bundle.directory)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "error:" not in done.stdout
    assert validate_bundle(bundle.directory, bundle.dockerfile) == []


def test_csv_carries_the_project(bundle: BundleResult) -> None:
    csv = csv_of(bundle)
    spec = csv["spec"]

    assert csv["metadata"]["name"] == "memcached-operator.v0.1.0"
    assert spec["version"] == "0.1.0"
    [owned] = spec["customresourcedefinitions"]["owned"]
    assert (owned["name"], owned["version"], owned["kind"]) == (
        f"memcacheds.cache.{DOMAIN}",
        "v1alpha1",
        "Memcached",
    )
    [example] = json.loads(csv["metadata"]["annotations"]["alm-examples"])
    assert example["kind"] == "Memcached"
    [deployment] = spec["install"]["spec"]["deployments"]
    assert deployment["name"] == "memcached-operator-controller-manager"
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    assert "--webhook-manage-configurations=false" in container["args"]
    [cluster_permissions] = spec["install"]["spec"]["clusterPermissions"]
    assert cluster_permissions["serviceAccountName"] == "memcached-operator-controller-manager"
    assert any(
        "memcacheds" in rule["resources"] and "watch" in rule["verbs"]
        for rule in cluster_permissions["rules"]
    )
    [permissions] = spec["install"]["spec"]["permissions"]
    assert any("leases" in rule["resources"] for rule in permissions["rules"])
    [webhook] = spec["webhookdefinitions"]
    assert webhook["type"] == "ValidatingAdmissionWebhook"
    assert webhook["deploymentName"] == deployment["name"]
    assert webhook["webhookPath"] == "/validate/size.cache.bundle.ansible-operator.test"
    assert (webhook["containerPort"], webhook["targetPort"]) == (443, 9443)
    supported = {m["type"] for m in spec["installModes"] if m["supported"]}
    assert supported == {"AllNamespaces"}, "OLM installs webhooks in AllNamespaces mode only"


def test_bundle_files_and_image_labels(bundle: BundleResult) -> None:
    files = sorted(p.name for p in (bundle.directory / "manifests").iterdir())
    annotations = load(bundle.directory / "metadata" / "annotations.yaml")["annotations"]
    dockerfile = bundle.dockerfile.read_text()

    assert files == [
        f"cache.{DOMAIN}_memcacheds.yaml",
        # bound to no one in the bundle: Prometheus' ServiceAccount gets it (--metrics-secure)
        "memcached-operator-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        "memcached-operator-metrics_v1_service.yaml",  # the metrics Service ships as is
        "memcached-operator.clusterserviceversion.yaml",
    ], "OLM creates the ServiceAccount and the bindings; the CSV holds the roles"
    assert annotations["operators.operatorframework.io.bundle.mediatype.v1"] == "registry+v1"
    assert annotations["operators.operatorframework.io.bundle.package.v1"] == "memcached-operator"
    assert annotations["operators.operatorframework.io.bundle.channels.v1"] == "alpha,stable"
    assert annotations["operators.operatorframework.io.bundle.channel.default.v1"] == "stable"
    for key, value in annotations.items():
        assert f"LABEL {key}={value}\n" in dockerfile
    assert "COPY bundle/manifests /manifests/" in dockerfile


def test_a_bundle_olm_would_refuse_is_refused_by_both_validators(
    bundle: BundleResult, validator: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "bundle"
    shutil.copytree(bundle.directory, broken)
    (broken / "manifests" / f"cache.{DOMAIN}_memcacheds.yaml").unlink()

    done = olm_validate(validator, broken)
    problems = validate_bundle(broken)

    assert done.returncode == 1
    assert "owned CRD" in done.stdout and "not found in bundle" in done.stdout
    assert any("has no CRD file in manifests/" in problem for problem in problems), problems


def test_this_repository_bundles(validator: Path, tmp_path: Path) -> None:
    options = BundleOptions(package="ansible-operator-samples", output=tmp_path / "bundle")

    result = write_bundle(REPO, options)

    done = olm_validate(validator, result.directory)
    assert done.returncode == 0, done.stdout + done.stderr
    assert validate_bundle(result.directory, result.dockerfile) == []
    kinds = {load(p)["kind"] for p in (result.directory / "manifests").iterdir()}
    assert "ServiceMonitor" in kinds
    assert any("NetworkPolicy" in warning for warning in result.warnings)
    csv = load(
        result.directory / "manifests" / "ansible-operator-samples.clusterserviceversion.yaml"
    )
    assert [w["generateName"] for w in csv["spec"]["webhookdefinitions"]] == [
        "image-rewrite.goharbor.io"
    ]


# -- what OLM would create, against a real API server -----------------------------------


def olm_objects(csv: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """The Deployment, roles and webhook configuration OLM makes from the CSV."""
    install = csv["spec"]["install"]["spec"]
    objects: list[dict[str, Any]] = []
    for deployment in install["deployments"]:
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": deployment["name"], "namespace": namespace},
                "spec": deployment["spec"],
            }
        )
    for index, permission in enumerate(install["clusterPermissions"]):
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": f"{namespace}-bundle-{index}"},
                "rules": permission["rules"],
            }
        )
    for index, permission in enumerate(install["permissions"]):
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": f"bundle-{index}", "namespace": namespace},
                "rules": permission["rules"],
            }
        )
    webhooks = []
    for definition in csv["spec"].get("webhookdefinitions", []):
        webhook = {
            key: definition[key]
            for key in ("rules", "failurePolicy", "sideEffects", "timeoutSeconds", "matchPolicy")
            if key in definition
        }
        webhook["name"] = definition["generateName"]
        webhook["admissionReviewVersions"] = definition["admissionReviewVersions"]
        webhook["clientConfig"] = {
            "service": {
                "namespace": namespace,
                "name": f"{definition['deploymentName']}-service",
                "path": definition["webhookPath"],
                "port": definition["containerPort"],
            }
        }
        webhooks.append(webhook)
    if webhooks:
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": f"{namespace}-bundle"},
                "webhooks": webhooks,
            }
        )
    return objects


@pytest.mark.cluster
def test_bundle_is_admitted_by_the_api_server(
    bundle: BundleResult, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    manifests = bundle.directory / "manifests"
    crds = [p for p in manifests.iterdir() if load(p)["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        [applied] = apply_manifests(kube_api, crd, dry_run=True)
        assert applied["kind"] == "CustomResourceDefinition"
    objects = olm_objects(csv_of(bundle), kube_namespace)

    admitted = [
        apply_manifests(kube_api, yaml.safe_dump(obj), kube_namespace, dry_run=True)[0]
        for obj in objects
    ]

    assert [obj["kind"] for obj in admitted] == [
        "Deployment",
        "ClusterRole",
        "Role",
        "ValidatingWebhookConfiguration",
    ]
    assert client.AppsV1Api(kube_api).list_namespaced_deployment(kube_namespace).items == []


@pytest.mark.cluster
def test_network_policies_are_admitted(kube_api: client.ApiClient, kube_namespace: str) -> None:
    policies = sorted((REPO / "config" / "network-policy").glob("*.yaml"))
    admitted = []
    for path in policies:
        for doc in documents(path):
            doc["metadata"]["namespace"] = kube_namespace
            admitted += apply_manifests(kube_api, yaml.safe_dump(doc), dry_run=True)

    assert [obj["kind"] for obj in admitted] == ["NetworkPolicy", "NetworkPolicy"]


def test_a_transforming_kustomization_is_refused_with_the_way_round(
    project: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "project"
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("bundle", "bundle.Dockerfile"))
    kustomization = copy / "config" / "default" / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + "namePrefix: memcached-\n")

    with pytest.raises(BundleError) as refused:
        write_bundle(copy, BundleOptions())

    assert "config/default/kustomization.yaml: `namePrefix`" in str(refused.value)
    assert "kubectl kustomize config/default > manifests.yaml" in str(refused.value)
