"""The Mutating- and ValidatingWebhookConfiguration the API server reads our webhooks from.

One of each kind per operator (named by `--webhook-configuration-name`), made from the
watches file's webhooks at start-up with server-side apply, so a webhook removed from the
file leaves the configuration, and the `caBundle` always matches the serving certificate (kept
so while the operator runs: `apply_ca_bundle`, when the CA is renewed). A
kind with no webhook left has its configuration deleted (only one we made). Who ships the
configurations as manifests turns this off (`--webhook-manage-configurations=false`).

Where the API server calls: a Service in the cluster (`clientConfig.service`), or a URL
(`ansible-operator run` outside a cluster: the loopback address the local API server
reaches; such configurations go when the operator stops, since nothing answers there then).

Stale configurations (`remove_stale_configurations`): an operator started once with another
id (`--leader-election-id`, `--webhook-configuration-name`) and killed left configurations of
that name, with that CA's bundle and those webhooks, still pointing at the same Service. The
API server keeps calling them, they fail (a CA this process does not serve from, paths it
does not serve) and, with `failurePolicy: Fail`, refuse the kind. The rule: at start, a
configuration of another name that we made (our managed-by label) and whose every webhook
calls our own endpoint (the same Service, or the same URL scheme, host and port) is
deleted. Only this operator's Pods answer there, and they answer only for the configuration
of their own name, so it cannot be anyone else's live configuration; one that also calls
elsewhere, or that we did not make, is left alone with a warning.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.types import Resource
from ansible_operator.project.webhook_entries import Webhook

log = logging.getLogger("ansible_operator.webhooks")

GROUP = "admissionregistration.k8s.io"
MUTATING = Resource(
    GROUP, "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", False
)
VALIDATING = Resource(
    GROUP, "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", False
)
MANAGED_BY = {"app.kubernetes.io/managed-by": "ansible-operator"}
FIELD_MANAGER = "ansible-operator-webhooks"


@dataclass(frozen=True)
class Endpoint:
    """Where the API server sends reviews: a Service (namespace, name, port) or a base URL."""

    service: tuple[str, str, int] | None = None
    url: str | None = None

    def client_config(self, path: str, ca_bundle: bytes | None) -> dict[str, Any]:
        config: dict[str, Any]
        if self.service is not None:
            namespace, name, port = self.service
            config = {"service": {"namespace": namespace, "name": name, "path": path, "port": port}}
        else:
            assert self.url is not None
            config = {"url": self.url.rstrip("/") + path}
        if ca_bundle:
            config["caBundle"] = base64.b64encode(ca_bundle).decode()
        return config

    def called_by(self, client_config: Any) -> bool:
        """Whether a webhook's `clientConfig` calls this endpoint (any path, any port of
        the Service: the Service's Pods are the same)."""
        if not isinstance(client_config, dict):
            return False
        if self.service is not None:
            namespace, name, _port = self.service
            service = client_config.get("service")
            return (
                isinstance(service, dict)
                and service.get("namespace") == namespace
                and service.get("name") == name
            )
        url = client_config.get("url")
        return isinstance(url, str) and _origin(url) == _origin(self.url or "")

    def describe(self) -> str:
        if self.service is not None:
            namespace, name, port = self.service
            return f"service {namespace}/{name}:{port}"
        return f"url {self.url}"


def _origin(url: str) -> tuple[str, str, int | None] | None:
    try:
        parts = urlsplit(url)
        return parts.scheme, (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None


def webhook_entry(webhook: Webhook, endpoint: Endpoint, ca_bundle: bytes | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": webhook.name,
        "clientConfig": endpoint.client_config(webhook.path, ca_bundle),
        "rules": [rule.manifest() for rule in webhook.rules],
        "failurePolicy": webhook.failure_policy,
        "sideEffects": webhook.side_effects,
        "timeoutSeconds": webhook.timeout_seconds,
        "admissionReviewVersions": ["v1"],
        "matchPolicy": "Equivalent",
        # Given even when empty, as the API server defaults them: else every apply
        # would look like a change.
        "namespaceSelector": webhook.namespace_selector or {},
        "objectSelector": webhook.object_selector or {},
    }
    if webhook.mutating:
        entry["reinvocationPolicy"] = webhook.reinvocation_policy
    return entry


def configuration(
    resource: Resource,
    name: str,
    webhooks: Sequence[Webhook],
    endpoint: Endpoint,
    ca_bundle: bytes | None,
) -> dict[str, Any]:
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "webhooks": [webhook_entry(webhook, endpoint, ca_bundle) for webhook in webhooks],
    }


def by_kind(webhooks: Sequence[Webhook]) -> dict[Resource, list[Webhook]]:
    return {
        MUTATING: [webhook for webhook in webhooks if webhook.mutating],
        VALIDATING: [webhook for webhook in webhooks if not webhook.mutating],
    }


async def sync_configurations(
    api: Api,
    name: str,
    webhooks: Sequence[Webhook],
    endpoint: Endpoint,
    ca_bundle: bytes | None,
) -> None:
    """Make both configurations say what the watches file says."""
    for resource, chosen in by_kind(webhooks).items():
        if chosen:
            try:
                await _apply(api, resource, name, chosen, endpoint, ca_bundle)
            except ApiError as error:
                raise SystemExit(
                    f"webhooks: cannot apply {resource.kind} {name}: {error} (the operator "
                    f"needs create and patch on {resource.plural}.{GROUP}; or ship the "
                    "configurations yourself with --webhook-manage-configurations=false)"
                ) from None
            log.info(
                "webhook configuration applied kind=%s name=%s webhooks=%s endpoint=%s",
                resource.kind,
                name,
                ",".join(webhook.name for webhook in chosen),
                endpoint.describe(),
            )
        else:
            await remove_configuration(api, resource, name)


async def _apply(
    api: Api,
    resource: Resource,
    name: str,
    webhooks: Sequence[Webhook],
    endpoint: Endpoint,
    ca_bundle: bytes | None,
) -> None:
    body = configuration(resource, name, webhooks, endpoint, ca_bundle)
    await api.patch(
        resource, name, body, patch_type="apply", field_manager=FIELD_MANAGER, force=True
    )


async def apply_ca_bundle(
    api: Api,
    name: str,
    webhooks: Sequence[Webhook],
    endpoint: Endpoint,
    ca_bundle: bytes,
) -> bool:
    """Give every webhook of the configurations `ca_bundle` where one lacks it (a renewed
    CA; or a replica that had not seen the renewal applied its older bundle); True when
    something was written: the API server reads it a moment later. Raises ApiError."""
    wanted = base64.b64encode(ca_bundle).decode()
    wrote = False
    for resource, chosen in by_kind(webhooks).items():
        if not chosen:
            continue
        try:
            current = await api.get(resource, name)
        except ApiError as error:
            if error.status != 404:
                raise
            current = {}
        bundles = {
            entry.get("name"): (entry.get("clientConfig") or {}).get("caBundle")
            for entry in current.get("webhooks") or []
            if isinstance(entry, dict)
        }
        if all(bundles.get(webhook.name) == wanted for webhook in chosen):
            continue
        await _apply(api, resource, name, chosen, endpoint, ca_bundle)
        log.info(
            "webhook caBundle applied kind=%s name=%s cas=%d",
            resource.kind,
            name,
            ca_bundle.count(b"-----BEGIN CERTIFICATE-----"),
        )
        wrote = True
    return wrote


async def remove_configurations(api: Api, name: str) -> None:
    for resource in (MUTATING, VALIDATING):
        await remove_configuration(api, resource, name)


async def remove_configuration(api: Api, resource: Resource, name: str) -> None:
    """Delete the configuration `name` of this kind if we made it; anything else stays."""
    try:
        current = await api.get(resource, name)
    except ApiError as error:
        if error.status != 404:
            log.warning(
                "webhook configuration not checked kind=%s name=%s: %s", resource.kind, name, error
            )
        return
    labels = (current.get("metadata") or {}).get("labels") or {}
    if labels.get("app.kubernetes.io/managed-by") != MANAGED_BY["app.kubernetes.io/managed-by"]:
        return
    try:
        await api.delete(resource, name)
    except ApiError as error:
        if error.status != 404:
            log.warning(
                "webhook configuration not deleted kind=%s name=%s: %s", resource.kind, name, error
            )
        return
    log.info("webhook configuration deleted kind=%s name=%s", resource.kind, name)


def stale(item: dict[str, Any], name: str, endpoint: Endpoint) -> bool | None:
    """True: a configuration of ours of another name whose every webhook calls `endpoint`
    (see the module); None: ours, of another name, calling `endpoint` and elsewhere."""
    metadata = item.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if (
        metadata.get("name") == name
        or labels.get("app.kubernetes.io/managed-by")
        != (MANAGED_BY["app.kubernetes.io/managed-by"])
    ):
        return False
    entries = [entry for entry in item.get("webhooks") or [] if isinstance(entry, dict)]
    ours = [endpoint.called_by(entry.get("clientConfig")) for entry in entries]
    if not ours or not any(ours):
        return False
    return True if all(ours) else None


async def remove_stale_configurations(api: Api, name: str, endpoint: Endpoint) -> None:
    """Delete what an operator of another id left calling our endpoint (see the module)."""
    for resource in (MUTATING, VALIDATING):
        try:
            found = await api.list(
                resource,
                label_selector="app.kubernetes.io/managed-by="
                + MANAGED_BY["app.kubernetes.io/managed-by"],
            )
        except ApiError as error:
            log.warning(
                "stale webhook configurations not looked for kind=%s: %s (the operator needs "
                "list on %s.%s)",
                resource.kind,
                error,
                resource.plural,
                GROUP,
            )
            continue
        for item in found.get("items") or []:
            verdict = stale(item, name, endpoint)
            other = (item.get("metadata") or {}).get("name", "")
            if verdict is None:
                log.warning(
                    "webhook configuration of another id also calls this operator, left "
                    "alone kind=%s name=%s endpoint=%s",
                    resource.kind,
                    other,
                    endpoint.describe(),
                )
            elif verdict:
                await _remove_stale(api, resource, other, endpoint)


async def _remove_stale(api: Api, resource: Resource, name: str, endpoint: Endpoint) -> None:
    try:
        await api.delete(resource, name)
    except ApiError as error:
        if error.status != 404:
            log.warning(
                "stale webhook configuration not deleted kind=%s name=%s: %s",
                resource.kind,
                name,
                error,
            )
        return
    log.warning(
        "stale webhook configuration deleted kind=%s name=%s endpoint=%s (left by an operator "
        "of another id; it called this operator's endpoint)",
        resource.kind,
        name,
        endpoint.describe(),
    )
