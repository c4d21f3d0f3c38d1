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
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.types import Resource
from ansible_operator.webhook_entries import Webhook

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

    def describe(self) -> str:
        if self.service is not None:
            namespace, name, port = self.service
            return f"service {namespace}/{name}:{port}"
        return f"url {self.url}"


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
    api: ApiClient,
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
    api: ApiClient,
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
    api: ApiClient,
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


async def remove_configurations(api: ApiClient, name: str) -> None:
    for resource in (MUTATING, VALIDATING):
        await remove_configuration(api, resource, name)


async def remove_configuration(api: ApiClient, resource: Resource, name: str) -> None:
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
