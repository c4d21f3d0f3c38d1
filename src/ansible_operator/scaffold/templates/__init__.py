"""Text templates of generated files (`string.Template`: `${name}`; a literal `$` is `$$`).

Kept as Python strings so they are packaged with the code whatever their file type.
"""

from __future__ import annotations

PROJECT = """\
# Written by `ansible-operator init` and `ansible-operator create api`; the
# `resources` list is how `create api` knows which kinds exist. Edit with care.
domain: ${domain}
layout: ansible-operator/v1
projectName: ${project}
resources: []
"""

WATCHES = """\
# watches.yaml: which kinds this operator reconciles, and with what.
# Each entry: group, version, kind and a role (roles/<name>) or a playbook
# (playbooks/<name>.yml), plus optional keys such as reconcilePeriod,
# manageStatus, watchDependentResources, snakeCaseParameters, vars, selector,
# finalizer (see the Operator SDK docs; an unknown key is an error here).
# `ansible-operator create api` appends entries to this list; your own edits
# and comments are kept.
[]
"""

REQUIREMENTS = """\
# Ansible collections the roles and playbooks use. The ansible-operator base
# image already has kubernetes.core and operator_sdk.util; list here what else
# you need, and install it in the Dockerfile with ansible-galaxy.
collections:
  - name: kubernetes.core
    version: ">=5.0.0"
"""

DOCKERFILE = """\
# The operator's image: the ansible-operator runtime plus this project's
# watches.yaml, roles and playbooks. `make image-build` builds it FROM the base
# image as ansible-operator builds it on this machine (nothing is pulled).
FROM ghcr.io/ansible-operator/ansible-operator:${tool_version}

# Collections beyond the base image's (see requirements.yml):
# COPY --chown=1001:0 requirements.yml ./requirements.yml
# RUN ansible-galaxy collection install -r requirements.yml

# What changes most comes last: after a role or playbook edit only these
# layers are built again (and loaded into the node by `make dev`).
COPY --chown=1001:0 watches.yaml ./watches.yaml
COPY --chown=1001:0 roles/ ./roles/
COPY --chown=1001:0 playbooks/ ./playbooks/
"""

# roles/ and playbooks/ start empty, but the Dockerfile copies both and git
# keeps no empty directory: a fresh clone must still build (Operator SDK
# writes the same file).
PLACEHOLDER = ""

DOCKERIGNORE = """\
# Kept out of the image build's context (the Dockerfile copies watches.yaml,
# roles/ and playbooks/ only).
.git/
.venv/
venv/
**/__pycache__/
**/*.pyc
.pytest_cache/
.ruff_cache/
.mypy_cache/
bin/
"""

GITIGNORE = """\
__pycache__/
.pytest_cache/
.venv/
bin/
"""

PYTEST_INI = """\
# pytest's settings for this project's tests (`make test`).
[pytest]
testpaths = tests
# pytest-asyncio warns while this is unset (and pytest, without pytest-asyncio,
# that it does not know it: that warning is silenced).
asyncio_default_fixture_loop_scope = function
filterwarnings =
    ignore:Unknown config option. asyncio_default_fixture_loop_scope:pytest.PytestConfigWarning
"""

TESTS_CONFTEST = '''\
"""Shared fixtures of this operator's tests.

None are needed: the ansible-operator package registers a pytest plugin that
provides `kube_cluster` (the cluster in KUBECONFIG, envtest binaries in
KUBEBUILDER_ASSETS, or a local control plane it builds), `kube_api` (a
kubernetes ApiClient for it) and `kube_namespace` (a fresh namespace per test).
Run the tests with: KUBECONFIG=... python -m pytest tests
"""
'''

SERVICE_ACCOUNT = """\
# The operator's identity in the cluster.
apiVersion: v1
kind: ServiceAccount
metadata:
  name: ${project}-controller-manager
  namespace: ${project}-system
"""

LEADER_ELECTION = """\
# Leader election: with --leader-elect, one replica works and the others wait
# on a Lease in the operator's namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: ${project}-leader-election
  namespace: ${project}-system
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ${project}-leader-election
  namespace: ${project}-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: ${project}-leader-election
subjects:
  - kind: ServiceAccount
    name: ${project}-controller-manager
    namespace: ${project}-system
"""

ROLE = """\
# The operator's ClusterRole: what its roles and playbooks may do.
# `ansible-operator create api` appends the rules each new kind needs (and what
# its generated role manages); your own rules and comments are kept.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ${project}-manager-role
rules:
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create", "patch"]
"""

ROLE_BINDING = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ${project}-manager-rolebinding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ${project}-manager-role
subjects:
  - kind: ServiceAccount
    name: ${project}-controller-manager
    namespace: ${project}-system
"""

METRICS_AUTH = """\
# Metrics are served with --metrics-secure (HTTPS, as controller-runtime does):
# the operator asks the API server who a scraper is (TokenReview) and whether it
# may read /metrics (SubjectAccessReview). Bind ${project}-metrics-reader to
# Prometheus' ServiceAccount to let it scrape.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ${project}-metrics-auth
rules:
  - apiGroups: ["authentication.k8s.io"]
    resources: ["tokenreviews"]
    verbs: ["create"]
  - apiGroups: ["authorization.k8s.io"]
    resources: ["subjectaccessreviews"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ${project}-metrics-auth
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ${project}-metrics-auth
subjects:
  - kind: ServiceAccount
    name: ${project}-controller-manager
    namespace: ${project}-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ${project}-metrics-reader
rules:
  - nonResourceURLs: ["/metrics"]
    verbs: ["get"]
"""

MANAGER = """\
# The operator's namespace and Deployment. One replica does the work; more
# replicas wait on the leader-election Lease and take over when it expires.
apiVersion: v1
kind: Namespace
metadata:
  name: ${project}-system
  labels:
    app.kubernetes.io/name: ${project}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${project}-controller-manager
  namespace: ${project}-system
  labels:
    app.kubernetes.io/name: ${project}
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: ${project}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: ${project}
    spec:
      serviceAccountName: ${project}-controller-manager
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      terminationGracePeriodSeconds: 40  # > --graceful-shutdown-timeout: runs may finish
      containers:
        - name: manager
          image: ${project}:latest
          # The image is loaded into the node (`make image-load`), not pulled.
          imagePullPolicy: IfNotPresent
          args:
            - --leader-elect
            - --leader-election-id=${project}
            - --health-probe-bind-address=:6789
            - --metrics-bind-address=:8443
            # HTTPS, for scrapers the API server says may read /metrics only
            # (config/rbac/metrics_auth.yaml), as controller-runtime serves them.
            - --metrics-secure
            - --graceful-shutdown-timeout=30s
          env:
            - name: WATCH_NAMESPACE
              value: ""  # all namespaces; a comma list narrows it
            - name: ANSIBLE_GATHERING
              value: explicit
          ports:
            - name: metrics
              containerPort: 8443
            - name: health
              containerPort: 6789
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            initialDelaySeconds: 15
            periodSeconds: 20
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            initialDelaySeconds: 5
            periodSeconds: 10
          resources:
            requests:
              cpu: 100m
              memory: 256Mi
            limits:
              cpu: "1"
              memory: 1Gi
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
---
# The operator's metrics, for config/prometheus/ (a ServiceMonitor) to find.
apiVersion: v1
kind: Service
metadata:
  name: ${project}-metrics
  namespace: ${project}-system
  labels:
    app.kubernetes.io/name: ${project}
spec:
  selector:
    app.kubernetes.io/name: ${project}
  ports:
    - name: metrics
      port: 8443
      targetPort: metrics
"""

# A Prometheus Operator ServiceMonitor (needs its CRDs; `../prometheus` in
# config/default/kustomization.yaml), as Operator SDK's scaffold has.
PROMETHEUS_MONITOR = """\
# Prometheus scrapes the operator's metrics Service (config/manager/manager.yaml).
# Needs the Prometheus Operator's CRDs. Metrics are served over HTTPS to
# authorised scrapers only (--metrics-secure): bind the ClusterRole
# ${project}-metrics-reader (config/rbac/metrics_auth.yaml) to Prometheus'
# ServiceAccount, whose token is sent below.
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: ${project}-metrics
  namespace: ${project}-system
  labels:
    app.kubernetes.io/name: ${project}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: ${project}
  endpoints:
    - path: /metrics
      port: metrics
      scheme: https
      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
      tlsConfig:
        # The metrics certificate is self-signed unless --metrics-cert-path gives
        # one; with a CA-issued certificate, set `ca` and `serverName` instead.
        insecureSkipVerify: true
"""

NETWORK_POLICY_METRICS = """\
# Only Pods of namespaces labelled `metrics: enabled` (where Prometheus runs) may
# reach the metrics port, as kubebuilder's scaffold has. Once a NetworkPolicy
# selects the operator's Pods, any ingress no policy allows is dropped (an
# admission webhook's port then needs a policy of its own). Needs a CNI that
# enforces NetworkPolicies.
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: ${project}-allow-metrics-traffic
  namespace: ${project}-system
  labels:
    app.kubernetes.io/name: ${project}
spec:
  podSelector:
    matchLabels:
      app.kubernetes.io/name: ${project}
  policyTypes:
    - Ingress
  ingress:
    - from:
        - namespaceSelector:
            matchLabels:
              metrics: enabled
      ports:
        - port: 8443  # --metrics-bind-address
          protocol: TCP
"""

CRD = """\
# The ${kind} API. Its spec schema is open (any field is kept): describe your
# fields under spec.properties as the API settles, so the server validates them.
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${plural}.${group}
spec:
  group: ${group}
  names:
    kind: ${kind}
    listKind: ${kind}List
    plural: ${plural}
    singular: ${name}
  scope: Namespaced
  versions:
    - name: ${version}
      served: true
      storage: true
      subresources:
        status: {}
      additionalPrinterColumns:
        - name: Ready
          type: string
          jsonPath: .status.conditions[?(@.type=="Successful")].status
        - name: Reason
          type: string
          jsonPath: .status.conditions[?(@.type=="Successful")].reason
        - name: Age
          type: date
          jsonPath: .metadata.creationTimestamp
      schema:
        openAPIV3Schema:
          description: ${kind} is reconciled by the ${project} operator.
          type: object
          properties:
            apiVersion:
              type: string
            kind:
              type: string
            metadata:
              type: object
            spec:
              description: What the ${kind} should be.
              type: object
              x-kubernetes-preserve-unknown-fields: true
              properties:
                size:
                  description: How many entries the ${kind}'s ConfigMap holds.
                  type: integer
                  minimum: 0
                  default: 1
            status:
              description: Written by the operator.
              type: object
              x-kubernetes-preserve-unknown-fields: true
              properties:
                observedGeneration:
                  description: The generation the last reconcile saw.
                  type: integer
                  format: int64
                conditions:
                  type: array
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [type]
                  items:
                    type: object
                    required: [type, status]
                    properties:
                      type:
                        type: string
                      status:
                        type: string
                        enum: ["True", "False", "Unknown"]
                      reason:
                        type: string
                      message:
                        type: string
                      lastTransitionTime:
                        type: string
                        format: date-time
                      ansibleResult:
                        description: Task counts of the last Ansible run.
                        type: object
                        x-kubernetes-preserve-unknown-fields: true
"""

SAMPLE = """\
apiVersion: ${group}/${version}
kind: ${kind}
metadata:
  name: ${name}-sample
spec:
  size: 2
"""

# The reconcile tasks shared by the role and the playbook (indented by ${indent}).
TASKS = """\
- name: Keep a ConfigMap of spec.size entries for the ${kind}
  # Created through the operator's proxy, so it gets an ownerReference to the
  # ${kind}: deleted with it, and a change to it runs this again.
  kubernetes.core.k8s:
    state: present
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-${name}"
        namespace: "{{ ansible_operator_meta.namespace }}"
        labels:
          app.kubernetes.io/name: ${name}
          app.kubernetes.io/instance: "{{ ansible_operator_meta.name }}"
      data:
        size: "{{ size | string }}"
        entries: "{{ range(1, size | int + 1) | map('string') | join(',') }}"

- name: Report the ConfigMap in the ${kind}'s status
  # The runtime sets the Running/Successful/Failure conditions itself; a role
  # adds its own status keys (and conditions) with k8s_status.
  operator_sdk.util.k8s_status:
    api_version: ${group}/${version}
    kind: ${kind}
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      configMap: "{{ ansible_operator_meta.name }}-${name}"
      size: "{{ size | int }}"
"""

ROLE_TASKS_HEADER = """\
---
# Reconciles one ${kind} (${group}/${version}). Variables of every run:
#   size                     spec.size (spec keys are snake_cased)
#   ansible_operator_meta    {name, namespace} of the ${kind}
#   _${var_name}    the whole ${kind} object
"""

ROLE_DEFAULTS = """\
---
# Defaults of the ${name} role; spec fields of the ${kind} override them.
size: 1
"""

ROLE_META = """\
---
galaxy_info:
  author: ${project}
  description: Reconciles ${kind} (${group}/${version}) objects.
  license: Apache-2.0
  min_ansible_version: "2.15"
  galaxy_tags: []
dependencies: []
collections:
  - kubernetes.core
  - operator_sdk.util
"""

ROLE_README = """\
# ${name}

Reconciles `${kind}` objects (`${group}/${version}`), run by ansible-operator
for each created or changed ${kind} (see `watches.yaml`).

## Variables

| Name | Default | From |
| --- | --- | --- |
| `size` | `1` | `spec.size`: how many entries the ConfigMap holds |

Every run also gets `ansible_operator_meta` (`name`, `namespace`) and
`_${var_name}` (the whole object).

## What it does

Keeps a ConfigMap `<name>-${name}` in the object's namespace and writes
`status.configMap` and `status.size`. The runtime adds the `Running`,
`Successful` and `Failure` conditions.
"""

PLAYBOOK_HEADER = """\
---
# Reconciles one ${kind} (${group}/${version}). Variables of every run:
#   size                     spec.size (spec keys are snake_cased)
#   ansible_operator_meta    {name, namespace} of the ${kind}
#   _${var_name}    the whole ${kind} object
- hosts: localhost
  gather_facts: false
  collections:
    - kubernetes.core
    - operator_sdk.util
  vars:
    size: 1
  tasks:
"""

TEST = '''\
"""${kind} (${group}/${version}): `ansible-operator run` over this project,
against the cluster in KUBECONFIG (or one the ansible-operator plugin starts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import wait_for_condition

PROJECT = Path(__file__).resolve().parents[1]
CRD = PROJECT / "config" / "crd" / "bases" / "${group}_${plural}.yaml"
SAMPLE = PROJECT / "config" / "samples" / "${short_group}_${version}_${name}.yaml"
GROUP, VERSION, PLURAL = "${group}", "${version}", "${plural}"


@pytest.fixture(scope="module")
def operator(
    kube_cluster, kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    apply_manifests(kube_api, CRD)
    process = OperatorProcess(
        PROJECT / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path_factory.mktemp("operator") / "operator.log",
        cwd=PROJECT,
    )
    process.start()
    yield process
    process.stop()


def test_sample_gets_its_configmap(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    sample = yaml.safe_load(SAMPLE.read_text())
    name, size = sample["metadata"]["name"], sample["spec"]["size"]
    apply_manifests(kube_api, SAMPLE, kube_namespace)

    try:
        obj = wait_for_condition(
            kube_api, GROUP, VERSION, PLURAL, kube_namespace, name, "Successful", timeout=180
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\\noperator log:\\n{operator.logs[-4000:]}") from None

    config_map = client.CoreV1Api(kube_api).read_namespaced_config_map(
        f"{name}-${name}", kube_namespace
    )
    assert config_map.data["size"] == str(size)
    assert config_map.data["entries"] == ",".join(str(i) for i in range(1, size + 1))
    [owner] = config_map.metadata.owner_references
    assert (owner.kind, owner.name) == ("${kind}", name)
    assert obj["status"]["configMap"] == config_map.metadata.name
    assert obj["status"]["size"] == size
'''

# A second version of a kind (`create api --version` on a kind the project has).
CONVERSION_COMMENT = (
    "${kind} ${version} converts to and from ${hub} (the hub: the version the operator "
    "watches and its role reads) by this fieldMap, in the operator's process: a rule "
    "for each field that moves or is renamed ({hub: PATH, spoke: PATH}), splits "
    "({..., spoke: {PART: PATH}, format: ...}) or gets a default ({hub: PATH, "
    "default: VALUE}); what ${version} cannot hold travels in an annotation. Or give "
    "`role:` instead of `fieldMap:` to convert with a role (docs: ansible-operator's "
    'docs/reference.md, "Conversion webhooks").'
)

CONVERSION_STANZA = {
    "strategy": "Webhook",
    "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {
                "namespace": "${project}-system",
                "name": "${project}-webhook-service",
                "path": "/convert/${name_lower}.${group}",
                "port": 443,
            }
        },
    },
}
CRD_CONVERSION_COMMENT = """\
# ${kind} has several versions: the API server calls the operator to convert
# them (watches.yaml, `- conversion:`), at the Service config/webhook/ makes. As
# shipped no caBundle: the operator adds it, from the CA it keeps in the Secret
# ${project}-webhook-ca, when it starts (and its URL, run outside the cluster).
# Until an operator has started, reading a version other than the stored one
# fails rather than losing fields.
"""

WEBHOOK_SERVICE = """\
# Where the API server sends the operator's conversion (and admission) reviews:
# every replica answers. The operator finds this Service by its name,
# <--leader-election-id>-webhook-service, makes and keeps its CA in the Secret
# ${project}-webhook-ca and puts the caBundle into the CRDs it converts.
apiVersion: v1
kind: Service
metadata:
  name: ${project}-webhook-service
  namespace: ${project}-system
  labels:
    app.kubernetes.io/name: ${project}
spec:
  selector:
    app.kubernetes.io/name: ${project}
  ports:
    - name: webhook
      port: 443
      targetPort: 9443  # --webhook-bind-address (default :9443)
      protocol: TCP
"""

WEBHOOK_RBAC = """\
# What the operator needs to serve conversions: to keep the webhook CA in a
# Secret of its namespace (the CRDs it converts are in config/rbac/role.yaml).
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: ${project}-webhook-ca
  namespace: ${project}-system
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get", "create", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ${project}-webhook-ca
  namespace: ${project}-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: ${project}-webhook-ca
subjects:
  - kind: ServiceAccount
    name: ${project}-controller-manager
    namespace: ${project}-system
"""

KUSTOMIZATION_HEADER = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
"""

CRD_KUSTOMIZATION = (
    """\
# The CRDs of this project: `make install` applies them, `make uninstall`
# removes them. `ansible-operator create api` appends each new kind's CRD.
"""
    + KUSTOMIZATION_HEADER
    + "resources: []\n"
)

SAMPLES_KUSTOMIZATION = (
    """\
# One sample object of each kind: kubectl apply -k config/samples -n NAMESPACE.
# `ansible-operator create api` appends each new kind's sample.
"""
    + KUSTOMIZATION_HEADER
    + "resources: []\n"
)

RBAC_KUSTOMIZATION = (
    """\
# The operator's identity and permissions.
"""
    + KUSTOMIZATION_HEADER
    + """\
resources:
  - service_account.yaml
  - role.yaml
  - role_binding.yaml
  - leader_election.yaml
  - metrics_auth.yaml
"""
)

MANAGER_KUSTOMIZATION = (
    """\
# The operator's namespace and Deployment (`make deploy` sets its image to IMG).
"""
    + KUSTOMIZATION_HEADER
    + """\
resources:
  - manager.yaml
"""
)

DEFAULT_KUSTOMIZATION = (
    """\
# Everything `make deploy` applies and `make undeploy` removes.
"""
    + KUSTOMIZATION_HEADER
    + """\
resources:
  - ../crd
  - ../rbac
  - ../manager
  # Uncomment with the Prometheus Operator installed: a ServiceMonitor for metrics.
  # - ../prometheus
  # Uncomment to let only namespaces labelled metrics=enabled reach the metrics port.
  # - ../network-policy
"""
)

PROMETHEUS_KUSTOMIZATION = (
    """\
# A ServiceMonitor for the operator's metrics (needs the Prometheus Operator).
"""
    + KUSTOMIZATION_HEADER
    + """\
resources:
  - monitor.yaml
"""
)

WEBHOOK_KUSTOMIZATION = (
    """\
# The Service the API server calls the operator's webhooks (conversions) at.
"""
    + KUSTOMIZATION_HEADER
    + """\
resources:
  - service.yaml
"""
)

NETWORK_POLICY_KUSTOMIZATION = (
    """\
# NetworkPolicies for the operator's Pods.
"""
    + KUSTOMIZATION_HEADER
    + """\
resources:
  - allow-metrics-traffic.yaml
"""
)

# Three replicas sharing the objects (a shard ring) instead of a leader and a
# stand-by: `make deploy DEPLOY_CONFIG=config/sharding`. JSON patches, whose
# `test` step makes the build fail if manager.yaml changed under them.
SHARDING_KUSTOMIZATION = (
    """\
# Three replicas that share the objects (a shard ring: each replica reconciles
# its share of the objects, by uid; see ansible-operator's
# docs/reference.md, "Sharding: replicas that share the objects") instead of one
# leader and a stand-by. Deploy it with `make deploy DEPLOY_CONFIG=config/sharding`
# (`make undeploy DEPLOY_CONFIG=config/sharding` removes it). config/default, with:
#   - 3 replicas, `--shard-ring=${project}` in place of `--leader-elect` (the two
#     are exclusive; --leader-election-id stays, it also names the webhook
#     configuration), POD_NAME from the Downward API (each replica's identity:
#     its Lease is `<ring>-<Pod name>`), and the replicas spread over nodes where
#     the scheduler can (preferred, not required);
#   - RBAC: nothing to add, the Role in config/rbac/leader_election.yaml already
#     grants every Lease verb a ring member uses (get, list, watch, create,
#     update, patch, delete).
# The `test` step fails the build if config/manager/manager.yaml no longer has
# --leader-elect first: then edit the patch to match.
"""
    + KUSTOMIZATION_HEADER
    + """\
resources:
  - ../default
patches:
  - target:
      group: apps
      version: v1
      kind: Deployment
      name: ${project}-controller-manager
    patch: |-
      - op: replace
        path: /spec/replicas
        value: 3
      - op: test
        path: /spec/template/spec/containers/0/args/0
        value: --leader-elect
      - op: replace
        path: /spec/template/spec/containers/0/args/0
        value: --shard-ring=${project}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value:
          name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
      - op: add
        path: /spec/template/spec/affinity
        value:
          podAntiAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
              - weight: 100
                podAffinityTerm:
                  topologyKey: kubernetes.io/hostname
                  labelSelector:
                    matchLabels:
                      app.kubernetes.io/name: ${project}
"""
)

# Rendered with `@@{name}` placeholders (make's own `$$` and `$$(...)` stay as
# they are). Recipe lines start with a tab, written as \\t.
MAKEFILE = """\
# The targets an Operator SDK project has, done with ansible-operator's tools.
# `make help` lists them. The cluster is the one in KUBECONFIG.

# The operator's image (image-build, image-load, dev, deploy).
IMG ?= @@{project}:latest
# The image config/manager/manager.yaml names; `make deploy` puts IMG there.
MANIFEST_IMG := @@{project}:latest
# What deploy and undeploy apply and remove: config/default, or config/sharding
# (three replicas sharing the objects instead of a leader and a stand-by).
DEPLOY_CONFIG ?= config/default
# The operator's Deployment, as config/manager/manager.yaml makes it.
OPERATOR_NAMESPACE ?= @@{project}-system
OPERATOR_LABEL ?= app.kubernetes.io/name=@@{project}

KUBECTL ?= kubectl
# The ansible-operator command: `pip install ansible-operator` (or pipx) puts it
# on PATH; elsewhere, name it: make ANSIBLE_OPERATOR=~/venvs/ao/bin/ansible-operator
ANSIBLE_OPERATOR ?= ansible-operator
# The command, or make stops with what to do (only the targets that use it).
TOOL = $(if $(shell command -v $(firstword $(ANSIBLE_OPERATOR)) 2>/dev/null),$(ANSIBLE_OPERATOR),\\
    $(error ANSIBLE_OPERATOR=$(ANSIBLE_OPERATOR) is not a command: install ansible-operator \\
    (pip install ansible-operator, or pipx install ansible-operator) or name it with \\
    make ANSIBLE_OPERATOR=/path/to/ansible-operator))
# The Python ansible-operator runs with: its pytest plugin is there (`make test`).
PYTHON ?= $(shell $(TOOL) doctor --python)
# Who builds the image: by default ansible-operator (buildah in its own image
# store, where the base image is built: nothing is pulled); CONTAINER_TOOL=docker,
# podman or buildah builds with that tool, FROM the base image in its registry.
CONTAINER_TOOL ?=
PUSH_TOOL ?= $(or $(CONTAINER_TOOL),$(shell command -v buildah >/dev/null 2>&1 && echo buildah \
    || { command -v docker >/dev/null 2>&1 && echo docker || echo podman; }))
# `make run` serves health probes and metrics on loopback, and its API proxy,
# each on a free port, so that two operators run side by side; set one to fix it.
HEALTH_PROBE_ADDR ?= 127.0.0.1:0
METRICS_ADDR ?= 127.0.0.1:0
PROXY_PORT ?= 0
# `make uninstall ignore-not-found=true` succeeds when nothing is installed.
ignore-not-found ?= false

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
\t@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-14s %s\\n", $$1, $$2}' \\
\t\t$(MAKEFILE_LIST)

##@ Development

.PHONY: run
run: install ## Install the CRDs, then run the operator from this directory against the cluster.
\t$(TOOL) run --watches-file=./watches.yaml \\
\t\t--health-probe-bind-address=$(HEALTH_PROBE_ADDR) --metrics-bind-address=$(METRICS_ADDR) \\
\t\t--proxy-port=$(PROXY_PORT)

.PHONY: check
check: ## Load watches.yaml, roles and playbooks without a cluster; fail on problems, RBAC gaps.
\t$(TOOL) check --strict .

.PHONY: test
test: ## Run the tests in tests/ against a real API server.
\t$(PYTHON) -m pytest tests

.PHONY: dev
dev: check image-load ## After an edit (roles, RBAC, CRDs): check, rebuild, load, apply, restart.
\t$(APPLY_CONFIG)
\t$(KUBECTL) -n $(OPERATOR_NAMESPACE) delete pod -l $(OPERATOR_LABEL) --wait=false

##@ Build

.PHONY: image-build
image-build: ## Build the operator's image IMG (see CONTAINER_TOOL).
ifeq ($(CONTAINER_TOOL),)
\t$(TOOL) cluster load --build . --no-load $(IMG)
else
\t$(CONTAINER_TOOL) build -t $(IMG) .
endif

.PHONY: docker-build
docker-build: image-build ## Same as image-build.

.PHONY: image-load
image-load: ## Build IMG and load it into the local node ('cluster up --node').
\t$(TOOL) cluster load --build . $(IMG)

.PHONY: docker-push
docker-push: ## Push the image IMG (built with CONTAINER_TOOL).
\t$(PUSH_TOOL) push $(IMG)

.PHONY: image-push
image-push: docker-push ## Same as docker-push.

##@ Deployment

.PHONY: install
install: ## Install the CRDs (config/crd).
\t$(KUBECTL) apply -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRDs, and with them every object of their kinds.
\t$(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -k config/crd

# What deploy and dev apply: DEPLOY_CONFIG, its Deployment running the image IMG.
APPLY_CONFIG = $(KUBECTL) kustomize $(DEPLOY_CONFIG) \\
\t| sed 's|image: $(MANIFEST_IMG)$$|image: $(IMG)|' | $(KUBECTL) apply -f -

.PHONY: deploy
deploy: check ## Check (an RBAC gap fails), then deploy DEPLOY_CONFIG running the image IMG.
\t$(APPLY_CONFIG)

.PHONY: undeploy
undeploy: ## Remove everything deploy applied, CRDs included.
\t$(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -k $(DEPLOY_CONFIG)

##@ Bundle (OLM)

# The bundle's semantic version and OLM channels (default channel: the first).
VERSION ?= 0.0.1
CHANNELS ?= alpha
DEFAULT_CHANNEL ?=
BUNDLE_IMG ?= @@{project}-bundle:v$(VERSION)

.PHONY: bundle
bundle: ## Write the OLM bundle (bundle/, bundle.Dockerfile) for IMG at VERSION, and check it.
\t$(TOOL) bundle --version $(VERSION) --channels $(CHANNELS) --image $(IMG) \\
\t\t$(if $(DEFAULT_CHANNEL),--default-channel $(DEFAULT_CHANNEL))

.PHONY: bundle-build
bundle-build: ## Build the bundle image BUNDLE_IMG.
\t$(PUSH_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image BUNDLE_IMG.
\t$(PUSH_TOOL) push $(BUNDLE_IMG)
"""
