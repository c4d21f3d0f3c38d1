"""The `spec.conversion` of each converted kind's CustomResourceDefinition, kept in sync.

For each `- conversion:` entry the operator finds its CRD (discovery gives the kind's
plural: the CRD is `<plural>.<group>`), then follows that one CRD with a watch:

- its versions' schemas go to the kind's Converter (what each version holds, so what a
  conversion would lose: schema.py), and problems with the declared conversion (a hub
  the CRD lacks, a served version with no conversion, no storage version declared)
  are logged once each;
- its `spec.conversion` is made what the operator serves (strategy Webhook, the
  endpoint, `/convert/<kind>.<group>`, the caBundle, conversionReviewVersions v1) with
  a merge patch, at start and whenever someone changes it (a CRD re-applied from
  its manifest), at most once every `REAPPLY_AFTER` seconds (two operators that disagree
  do not fight in a loop); and again when the CA is renewed (`apply_ca_bundle`).

A CRD not installed yet is looked for again, less and less often (up to a minute). The
stanza is left in place when the operator stops: with it gone the API server would
convert with strategy None, keeping what the storage version declares and dropping the
rest. An operator that is down makes reads of the other versions fail, not lose data.
One exception: an operator serving on a loopback URL (`ansible-operator run` on a
workstation) puts back, as it stops, the webhook stanza it found (the manifest's Service),
so that `kubectl apply` of the CRD's manifest works again (kubectl would add the
manifest's `service` beside our `url`, which the API server refuses); the CRD's
conversions then fail, as they did before it started, until an operator serves them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.conversion.converter import Converter
from ansible_operator.conversion.crd_changes import declared_problems
from ansible_operator.conversion.kinds import KindConversion
from ansible_operator.conversion.schema import version_schemas
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import Resource
from ansible_operator.webhooks.configurations import Endpoint

log = logging.getLogger("ansible_operator.webhooks")

CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    False,
)
FIELD_MANAGER = "ansible-operator-conversion"
REVIEW_VERSIONS = ["v1"]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
REAPPLY_AFTER = 10.0  # seconds between two applies of one CRD's stanza
FIND_AGAIN = (2.0, 60.0)  # first and longest wait before looking for a missing CRD again


def conversion_path(declared: KindConversion) -> str:
    """`/convert/<kind>.<group>`, lower case: the API server takes only DNS names for the
    segments of a Service path."""
    return f"/convert/{declared.kind.lower()}.{declared.group}"


def wanted(declared: KindConversion, endpoint: Endpoint, ca_bundle: bytes | None) -> dict[str, Any]:
    """The CRD's `spec.conversion` that sends its conversions to this operator."""
    return {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": endpoint.client_config(conversion_path(declared), ca_bundle),
            "conversionReviewVersions": list(REVIEW_VERSIONS),
        },
    }


def in_sync(crd: dict[str, Any], stanza: dict[str, Any]) -> bool:
    current = (crd.get("spec") or {}).get("conversion") or {}
    webhook = current.get("webhook") or {}
    client = webhook.get("clientConfig") or {}
    want = stanza["webhook"]["clientConfig"]
    if current.get("strategy") != stanza["strategy"]:
        return False
    if "v1" not in (webhook.get("conversionReviewVersions") or []):
        return False
    if client.get("caBundle") != want.get("caBundle") or client.get("url") != want.get("url"):
        return False
    service, want_service = client.get("service") or None, want.get("service")
    if want_service is None:
        return service is None
    return service is not None and all(
        service.get(key, 443 if key == "port" else None) == value
        for key, value in want_service.items()
    )


@dataclass
class Followed:
    """One converted kind: its converter, and its CRD once found."""

    declared: KindConversion
    converter: Converter
    crd_name: str | None = None
    crd: dict[str, Any] | None = None  # as last read
    found: dict[str, Any] | None = None  # its spec.conversion before we changed it
    seen: bool = False  # its CRD has been read: the converter knows the schemas
    applied_at: float = 0.0
    reported: set[str] = field(default_factory=set)
    first_read: asyncio.Event = field(default_factory=asyncio.Event)


class CrdConversions:
    def __init__(self, api: ApiClient, kinds: Sequence[Followed], *, manage: bool) -> None:
        self.api = api
        self.kinds = list(kinds)
        self.manage = manage  # False: the CRDs ship their stanza (--webhook-manage-...=false)
        self.endpoint: Endpoint | None = None
        self.ca_bundle: bytes | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._mapper = RestMapper(api)

    async def start(self, endpoint: Endpoint, ca_bundle: bytes | None, wait: float = 30.0) -> None:
        """Follow each kind's CRD; return once each CRD that exists has been read and
        its stanza applied (so the API server can convert before the controllers list)."""
        self.endpoint, self.ca_bundle = endpoint, ca_bundle
        for kind in self.kinds:
            self._tasks.append(asyncio.create_task(self._follow(kind)))
        waits = [asyncio.create_task(kind.first_read.wait()) for kind in self.kinds]
        _, pending = await asyncio.wait(waits, timeout=wait)
        for task in pending:
            task.cancel()

    async def apply_ca_bundle(self, ca_bundle: bytes) -> bool:
        """Every stanza that lacks this bundle (a renewed CA) gets it; True when one was
        written. Called at each step of the certificate rotation."""
        self.ca_bundle = ca_bundle
        wrote = False
        if not self.manage or self.endpoint is None:
            return False
        for kind in self.kinds:
            if kind.crd_name is None or kind.crd is None:
                continue
            if not in_sync(kind.crd, wanted(kind.declared, self.endpoint, ca_bundle)):
                wrote |= await self._apply(kind, force=True)
        return wrote

    async def stop(self, *, put_back: bool = False) -> None:
        """Stop following the CRDs; with `put_back` (a loopback URL, see the module), give
        each the webhook stanza it had before, where that called something else."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if not (put_back and self.manage):
            return
        for kind in self.kinds:
            found = _to_put_back(kind)
            client = (found.get("webhook") or {}).get("clientConfig") or {}
            if kind.crd_name is None or not kind.applied_at or not client:
                continue
            stanza = {
                "strategy": found.get("strategy", "Webhook"),
                "webhook": {
                    **(found.get("webhook") or {}),
                    "clientConfig": {
                        "url": None,
                        "service": None,
                        "caBundle": None,
                        **client,
                    },
                },
            }
            try:
                await self.api.patch(
                    CRDS,
                    kind.crd_name,
                    {"spec": {"conversion": stanza}},
                    patch_type="merge",
                    field_manager=FIELD_MANAGER,
                )
            except ApiError as error:
                log.warning("conversion stanza not put back crd=%s: %s", kind.crd_name, error)
                continue
            log.info("conversion stanza put back crd=%s (as found at start)", kind.crd_name)

    async def _find(self, kind: Followed) -> str | None:
        """The CRD's name, from one discovery: `<plural>.<group>` of a served version."""
        await self._mapper.refresh()
        for version in kind.declared.version_names:
            resource = self._mapper.known(kind.declared.group, version, kind.declared.kind)
            if resource is not None:
                return f"{resource.plural}.{kind.declared.group}"
        return None

    async def _follow(self, kind: Followed) -> None:
        wait = FIND_AGAIN[0]
        while True:
            try:
                if kind.crd_name is None:
                    kind.crd_name = await self._find(kind)
                if kind.crd_name is None:
                    _once(
                        kind,
                        f"no CRD serves {kind.declared.kind}.{kind.declared.group} yet: looking "
                        "for it again (conversions start once it is installed)",
                    )
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, FIND_AGAIN[1])
                    continue
                await self._watch(kind, kind.crd_name)
                wait = FIND_AGAIN[0]
            except asyncio.CancelledError:
                raise
            except ApiError as error:
                log.warning(
                    "conversion CRD not followed kind=%s.%s: %s (the operator needs get, list, "
                    "watch and patch on customresourcedefinitions)",
                    kind.declared.kind,
                    kind.declared.group,
                    error,
                )
                await asyncio.sleep(wait)
                wait = min(wait * 2, FIND_AGAIN[1])
            except Exception:
                log.exception(
                    "conversion CRD not followed kind=%s.%s",
                    kind.declared.kind,
                    kind.declared.group,
                )
                await asyncio.sleep(wait)

    async def _watch(self, kind: Followed, name: str) -> None:
        selector = f"metadata.name={name}"
        listing = await self.api.list(CRDS, field_selector=selector)
        items = listing.get("items") or []
        if not items:
            kind.crd_name = None
            return
        await self._seen(kind, items[0])
        version = (listing.get("metadata") or {}).get("resourceVersion")
        async for event in self.api.watch(CRDS, resource_version=version, field_selector=selector):
            kind_of_event = event.get("type")
            obj = event.get("object") or {}
            if kind_of_event in ("ADDED", "MODIFIED"):
                await self._seen(kind, obj)
            elif kind_of_event == "DELETED":
                log.warning("conversion CRD deleted name=%s", name)
                kind.crd_name = None
                return
            elif kind_of_event == "ERROR":
                return

    async def _seen(self, kind: Followed, crd: dict[str, Any]) -> None:
        kind.converter.set_schemas(version_schemas(crd))
        if kind.crd is None:
            kind.found = (crd.get("spec") or {}).get("conversion")
        kind.crd = crd
        kind.seen = True
        for problem in declared_problems(kind.declared, crd):
            _once(kind, problem.describe())
        if self.manage and self.endpoint is not None:
            stanza = wanted(kind.declared, self.endpoint, self.ca_bundle)
            if not in_sync(crd, stanza):
                await self._apply(kind)
        kind.first_read.set()

    async def _apply(self, kind: Followed, *, force: bool = False) -> bool:
        assert self.endpoint is not None and kind.crd_name is not None
        since = time.monotonic() - kind.applied_at
        if not force and kind.applied_at and since < REAPPLY_AFTER:
            log.warning(
                "conversion stanza of CRD %s changed by someone else %.1fs after ours; "
                "applying ours again in %.0fs",
                kind.crd_name,
                since,
                REAPPLY_AFTER - since,
            )
            await asyncio.sleep(REAPPLY_AFTER - since)
        stanza = wanted(kind.declared, self.endpoint, self.ca_bundle)
        client = stanza["webhook"]["clientConfig"]
        # A merge patch naming the other way to call as null: server-side apply would
        # keep a `service` the manifest's owner set beside our `url`, which is invalid.
        for way in ("url", "service", "caBundle"):
            client.setdefault(way, None)
        try:
            await self.api.patch(
                CRDS,
                kind.crd_name,
                {"spec": {"conversion": stanza}},
                patch_type="merge",
                field_manager=FIELD_MANAGER,
            )
        except ApiError as error:
            log.error(
                "conversion stanza not applied crd=%s: %s (the operator needs patch on "
                "customresourcedefinitions; or ship the stanza with the CRD and "
                "--webhook-manage-configurations=false)",
                kind.crd_name,
                error,
            )
            return False
        kind.applied_at = time.monotonic()
        log.info(
            "conversion stanza applied crd=%s endpoint=%s path=%s",
            kind.crd_name,
            self.endpoint.describe(),
            conversion_path(kind.declared),
        )
        return True


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def _calls_loopback(stanza: dict[str, Any]) -> bool:
    url = ((stanza.get("webhook") or {}).get("clientConfig") or {}).get("url") or ""
    return any(f"://{host}" in url for host in LOOPBACK_HOSTS)


def _to_put_back(kind: Followed) -> dict[str, Any]:
    """The stanza a loopback operator gives back as it stops: the one it found, unless
    that called a loopback URL too (left by an operator that did not stop cleanly), then
    the manifest's as `kubectl apply` recorded it; none: ours stays."""
    candidates = [kind.found or {}]
    applied = ((kind.crd or {}).get("metadata") or {}).get("annotations") or {}
    try:
        manifest = json.loads(applied.get(LAST_APPLIED, "") or "{}")
    except ValueError:
        manifest = {}
    candidates.append(
        ((manifest.get("spec") or {}) if isinstance(manifest, dict) else {}).get("conversion") or {}
    )
    for stanza in candidates:
        if isinstance(stanza, dict) and stanza.get("webhook") and not _calls_loopback(stanza):
            return stanza
    return {}


def _once(kind: Followed, message: str) -> None:
    if message not in kind.reported:
        kind.reported.add(message)
        log.warning("%s", message)
