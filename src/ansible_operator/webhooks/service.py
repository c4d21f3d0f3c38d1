"""Admission webhooks as the manager runs them: start, serve, stop.

Start: the serving certificate (tls.py), the server, then the configurations, last: the API
server calls only once something answers. Runs go through the manager's runner host (and so
its proxy, with grants that own nothing), started before the election: webhooks answer on
every replica, the leader's or not.

Where the API server calls (`Endpoint`):
- `--webhook-url`: that base URL;
- `--webhook-service NAMESPACE/NAME[:PORT]`, or in a cluster the Service
  `<configuration name>-webhook-service` in the operator's namespace (config/webhook/);
- else (`ansible-operator run` on a workstation): `https://127.0.0.1:<port>`, which a local
  API server reaches; these configurations are deleted when the operator stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from ansible_operator.conversion.converter import Converter
from ansible_operator.conversion.kinds import KindConversion
from ansible_operator.kube.client import ApiClient
from ansible_operator.observability.metrics import Metrics
from ansible_operator.project.reserved_vars import RefusedData
from ansible_operator.project.webhook_entries import Webhook
from ansible_operator.runner.host import RunnerHost
from ansible_operator.settings import Settings
from ansible_operator.settings.webhooks import (
    SERVICE_PORT,
    parse_bind_address,
    parse_secret,
    parse_service,
)
from ansible_operator.webhooks import configurations, tls
from ansible_operator.webhooks.admission_limits import FairSlots, SlotsBusy
from ansible_operator.webhooks.admission_log import AdmissionSummary
from ansible_operator.webhooks.answer import RunOutcome, decide
from ansible_operator.webhooks.configurations import Endpoint
from ansible_operator.webhooks.conversion_runs import ConversionRunner
from ansible_operator.webhooks.conversions import ConversionEndpoint
from ansible_operator.webhooks.crd_conversion import CrdConversions, Followed
from ansible_operator.webhooks.review import AdmissionRequest, admission_vars, review_answer
from ansible_operator.webhooks.rotation import CertificateRotation, now_utc
from ansible_operator.webhooks.runs import AdmissionRunner
from ansible_operator.webhooks.server import WebhookServer

log = logging.getLogger("ansible_operator.webhooks")

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
LOOPBACK = "127.0.0.1"


def in_cluster_namespace() -> str | None:
    try:
        return IN_CLUSTER_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


def configuration_name(settings: Settings) -> str:
    return settings.webhooks.configuration_name or settings.leader_election.id


@dataclass(frozen=True)
class Placement:
    """Where the API server calls, the names the certificate is for, and where the CA is
    kept (None: made afresh by this process)."""

    endpoint: Endpoint | None  # None: the loopback URL, once the port is bound
    names: list[str]
    ca_secret: tuple[str, str] | None


def placement(settings: Settings, pod_namespace: str | None) -> Placement:
    ca_secret = parse_secret(settings.webhooks.ca_secret) if settings.webhooks.ca_secret else None
    if settings.webhooks.url:
        host = urlsplit(settings.webhooks.url).hostname or LOOPBACK
        names = [host, "localhost", LOOPBACK]
        return Placement(Endpoint(url=settings.webhooks.url), names, ca_secret)
    service = None
    if settings.webhooks.service:
        service = parse_service(settings.webhooks.service)
    elif pod_namespace:
        service = (
            pod_namespace,
            f"{configuration_name(settings)}-webhook-service",
            SERVICE_PORT,
        )
    if service is None:
        return Placement(None, [LOOPBACK, "localhost"], ca_secret)
    namespace, name, _port = service
    names = [
        f"{name}.{namespace}.svc",
        name,
        f"{name}.{namespace}",
        f"{name}.{namespace}.svc.cluster.local",
    ]
    secret = ca_secret or (namespace, f"{configuration_name(settings)}-webhook-ca")
    return Placement(Endpoint(service=service), names, secret)


class WebhookService:
    def __init__(
        self,
        webhooks: Sequence[Webhook],
        settings: Settings,
        *,
        host: RunnerHost,  # the manager's: its runs, its proxy
        metrics: Metrics,
        scratch: Path,
        pod_namespace: str | None = None,  # None: this Pod's, when in a cluster
        conversions: Sequence[KindConversion] = (),
    ) -> None:
        self.webhooks = list(webhooks)
        self.conversions = [Followed(each, Converter(each)) for each in conversions]
        self.crds: CrdConversions | None = None
        self._conversion_runner: ConversionRunner | None = None
        self.settings = settings
        self.host = host
        self.metrics = metrics
        self.scratch = scratch
        self.pod_namespace = pod_namespace if pod_namespace is not None else in_cluster_namespace()
        self.endpoint: Endpoint | None = None
        self.bound: tuple[str, int] | None = None
        self._api: ApiClient | None = None
        self._runner: AdmissionRunner | None = None
        self._server: WebhookServer | None = None
        self._renewals: asyncio.Task[None] | None = None
        self._remove_on_stop = False
        self._loopback = False  # served at a loopback URL this process chose
        self._summary = AdmissionSummary()
        self._summaries: asyncio.Task[None] | None = None

    async def start(self, api: ApiClient) -> None:
        bind = parse_bind_address(self.settings.webhooks.bind_address)
        if bind is None:
            if self.conversions:
                log.warning(
                    "conversions declared in watches.yaml are not served: "
                    "--webhook-bind-address=0 (reading their kinds in other versions fails)"
                )
            return
        if not (self.webhooks or self.conversions):
            return
        where = placement(self.settings, self.pod_namespace)
        lifetimes = tls.Lifetimes.from_environment()
        if self.settings.webhooks.cert_dir is not None:
            serving = tls.from_files(self.settings.webhooks.cert_dir)
        else:
            serving = await tls.operator_made(
                api, where.ca_secret, where.names, self.scratch / "webhook-tls", lifetimes
            )
        if self.settings.webhooks.client_ca is not None:
            tls.require_client_certificates(serving.context, self.settings.webhooks.client_ca)
        self._api = api
        cap = self.settings.webhooks.max_concurrent_runs or 2 * (os.cpu_count() or 1)
        self._runner = AdmissionRunner(settings=self.settings, host=self.host, slots=FairSlots(cap))
        endpoint = None
        if self.conversions:
            if any(v.role is not None for each in self.conversions for v in each.declared.versions):
                self._conversion_runner = ConversionRunner(
                    settings=self.settings, host=self.host, slots=FairSlots(cap)
                )
            endpoint = ConversionEndpoint(
                self.conversions, metrics=self.metrics, runner=self._conversion_runner
            )
        self._server = WebhookServer(
            self.webhooks,
            self._admit,
            serving.context,
            *bind,
            metrics=self.metrics,
            conversions=endpoint,
        )
        self.bound = await self._server.start()
        self._summaries = asyncio.create_task(self._summary.run())
        if serving.watched:
            self._renewals = asyncio.create_task(serving.follow_renewals())
        self.endpoint = where.endpoint or Endpoint(url=f"https://{LOOPBACK}:{self.bound[1]}")
        self._loopback = where.endpoint is None
        if self.conversions:
            # Before the controllers list: objects stored in another version need us.
            self.crds = CrdConversions(
                api, self.conversions, manage=self.settings.webhooks.manage_configurations
            )
            await self.crds.start(self.endpoint, serving.ca_bundle)
        if not self.settings.webhooks.manage_configurations:
            log.info(
                "webhook configurations left to the manifests "
                "(--webhook-manage-configurations=false)"
            )
            self._rotate(api, serving, where.names, lifetimes, managed=False)
            return
        if serving.ca_bundle is None:
            log.warning(
                "webhook configurations carry no caBundle: %s has no ca.crt (cert-manager's CA "
                "injector, or whoever ships the configurations, must add it)",
                self.settings.webhooks.cert_dir,
            )
        if self.webhooks:
            self._remove_on_stop = where.endpoint is None
            await configurations.remove_stale_configurations(
                api, configuration_name(self.settings), self.endpoint
            )
            await configurations.sync_configurations(
                api,
                configuration_name(self.settings),
                self.webhooks,
                self.endpoint,
                serving.ca_bundle,
            )
        self._rotate(api, serving, where.names, lifetimes, managed=True)

    def _rotate(
        self,
        api: ApiClient,
        serving: tls.ServingTls,
        names: list[str],
        lifetimes: tls.Lifetimes,
        *,
        managed: bool,
    ) -> None:
        """Started last, once the configurations hold the bundle: an operator-made
        certificate (and its CA) renewed while the operator runs (rotation.py)."""
        if serving.store is None:
            return  # the user's files: followed by `follow_renewals`
        name, endpoint, webhooks = configuration_name(self.settings), self.endpoint, self.webhooks
        assert endpoint is not None

        crds = self.crds

        async def apply_bundle(bundle: bytes) -> bool:
            wrote = False
            if webhooks:
                wrote = await configurations.apply_ca_bundle(api, name, webhooks, endpoint, bundle)
            if crds is not None:
                wrote |= await crds.apply_ca_bundle(bundle)
            return wrote

        rotation = CertificateRotation(
            serving,
            names,
            self.scratch / "webhook-tls",
            lifetimes,
            apply_bundle if managed else None,
            bundle_applied_at=now_utc() if managed else None,
        )
        self._renewals = asyncio.create_task(rotation.run())

    async def stop(self) -> None:
        if self.crds is not None:
            # The CRDs keep a stanza (crd_conversion.py): no conversion beats a lossy one;
            # served on loopback, the one they had (kubectl apply of the manifest works).
            # A client of its own: the manager's may be closed by now.
            if self._loopback and self._api is not None:
                with contextlib.suppress(Exception):
                    async with ApiClient(self._api.config, timeout=10.0) as api:
                        self.crds.api = api
                        await self.crds.stop(put_back=True)
            await self.crds.stop()
        if self._summaries is not None:
            self._summaries.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._summaries
            self._summary.flush()
        if self._renewals is not None:
            # First: a rotation would apply the configurations deleted below again.
            self._renewals.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewals
        if self._remove_on_stop and self._api is not None:
            # Nothing will answer at this loopback address: leave no webhook that
            # would refuse every matching request (failurePolicy Fail) once we are gone.
            # A client of its own: the manager's may be closed by now.
            with contextlib.suppress(Exception):
                async with ApiClient(self._api.config, timeout=10.0) as api:
                    await configurations.remove_configurations(
                        api, configuration_name(self.settings)
                    )
        if self._server is not None:
            await self._server.stop()
        if self._runner is not None:
            await self._runner.stop()
        if self._conversion_runner is not None:
            await self._conversion_runner.stop()

    async def _admit(
        self, webhook: Webhook, request: AdmissionRequest, peer: str
    ) -> dict[str, object]:
        """The AdmissionReview answering `request` from the client at `peer`; SlotsBusy
        when that client may not wait for a run now (answered 429)."""
        assert self._runner is not None
        try:
            try:
                variables = await asyncio.to_thread(admission_vars, request, webhook)
            except RefusedData as refused:
                # Its data may not reach Ansible: decide() denies it, naming why; no run.
                request = replace(request, refused=tuple(refused.refusals))
                outcome = RunOutcome(None)
            else:
                outcome = await self._runner.run(webhook, request, variables, peer)
        except SlotsBusy:
            raise
        except RecursionError:  # the client's data, not our fault: no traceback
            log.warning(
                "admission request nests too deep to run webhook=%s %s peer=%s",
                webhook.name,
                request.describe(),
                peer,
            )
            outcome = RunOutcome(None, "the request nests too deep for Ansible")
        except Exception as error:  # the run could not even start: the policy decides
            log.exception(
                "admission run did not start webhook=%s %s", webhook.name, request.describe()
            )
            # Why is for the operator's log, not for whoever sent the request.
            outcome = RunOutcome(
                None, f"the webhook's run could not start ({type(error).__name__})"
            )
        decision = decide(webhook, request, outcome)
        self.metrics.run_duration.labels(
            f"webhook/{webhook.name}", "failed" if outcome.failure else "succeeded"
        ).observe(outcome.duration)
        verdict = (
            "policy"
            if decision.policy_reason is not None
            else "allowed"
            if decision.allowed
            else "denied"
        )
        self.metrics.webhook_admissions.labels(webhook.name, verdict).inc()
        self._summary.record(webhook.name, verdict, patched=decision.patched)
        if decision.policy_reason is not None:
            log.warning(
                "admission decided by failurePolicy=%s webhook=%s %s allowed=%s reason=%r run=%s",
                webhook.failure_policy,
                webhook.name,
                request.describe(),
                str(decision.allowed).lower(),
                decision.policy_reason,
                outcome.ident,
            )
        else:
            # admission_log.py: a line per allowed request only at debug level.
            log.log(
                logging.DEBUG if decision.allowed else logging.INFO,
                "admission webhook=%s %s allowed=%s patched=%s duration=%.3fs run=%s",
                webhook.name,
                request.describe(),
                str(decision.allowed).lower(),
                str(decision.patched).lower(),
                outcome.duration,
                outcome.ident,
            )
        return review_answer(decision.response)
