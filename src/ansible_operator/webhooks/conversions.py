"""The conversion endpoint: a ConversionReview in, the objects converted (or a failure
naming the watches.yaml entry) out.

`POST /convert/<kind>.<group>` (crd_conversion.py points the CRD there). A field map
converts in this process, on the event loop (a review of 100 objects takes milliseconds:
bench/webhook.py); a role converts a batch in one run (conversion_runs.py). Whatever
converted, the output is checked before it is sent (converter.checked): what the API
server would refuse, with a message naming nobody, is refused here naming the entry.
A review for a kind whose CRD the operator has not read yet is refused too ("not ready"):
without the versions' schemas it could not know what a version would lose.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from ansible_operator.conversion.converter import ConversionFailed
from ansible_operator.conversion.kinds import VersionConversion
from ansible_operator.conversion.review import ConversionRequest, failure, success
from ansible_operator.observability.metrics import Metrics
from ansible_operator.webhooks.admission_limits import SlotsBusy
from ansible_operator.webhooks.conversion_runs import ConversionRunner
from ansible_operator.webhooks.crd_conversion import Followed, conversion_path

log = logging.getLogger("ansible_operator.webhooks")


class ConversionEndpoint:
    def __init__(
        self,
        kinds: Sequence[Followed],
        *,
        metrics: Metrics | None = None,
        runner: ConversionRunner | None = None,  # None: roles are not served
    ) -> None:
        self.by_path = {conversion_path(kind.declared): kind for kind in kinds}
        self.metrics = metrics
        self.runner = runner

    async def answer(
        self, kind: Followed, request: ConversionRequest, peer: str = ""
    ) -> dict[str, Any]:
        """The ConversionReview answering `request` for `kind` from the client at `peer`;
        SlotsBusy when a role would run and that client already waits for too many."""
        started = time.perf_counter()
        declared = kind.declared
        name = f"{declared.kind}.{declared.group}"
        version = request.desired_version
        how = "fieldMap"
        try:
            if not kind.seen:
                raise ConversionFailed(
                    f"{declared.describe()}: the operator has not read CRD "
                    f"{kind.crd_name or name} yet; try again in a moment"
                )
            if request.desired_group != declared.group:
                raise ConversionFailed(
                    f"{declared.describe()}: asked for {request.desired_api_version}, "
                    f"of another group than {declared.group}"
                )
            if any(
                not kind.converter.in_process(_version(obj), version) for obj in request.objects
            ):
                how = "role"
            runner = self.runner

            async def run_role(
                entry: VersionConversion, objects: list[dict[str, Any]], target: str
            ) -> list[Any]:
                if runner is None:
                    raise ConversionFailed(f"{entry.describe()}: no runner serves roles here")
                return await runner.run(declared, entry, objects, target, peer)

            objects = await kind.converter.convert(request.objects, version, run_role)
        except ConversionFailed as failed:
            log.warning(
                "conversion refused kind=%s version=%s objects=%d reason=%r",
                name,
                version,
                len(request.objects),
                str(failed),
            )
            self._count(name, version, "failed", how, 0, started)
            return failure(request.uid, str(failed))
        except SlotsBusy:
            raise
        except RecursionError:  # the objects', not ours: no traceback
            self._count(name, version, "failed", how, 0, started)
            return failure(request.uid, f"{declared.describe()}: the objects nest too deep")
        except Exception as error:
            log.exception("conversion failed kind=%s version=%s", name, version)
            self._count(name, version, "failed", how, 0, started)
            # Why is for the operator's log, not for whoever reads the kind.
            return failure(
                request.uid,
                f"{declared.describe()}: the operator could not convert "
                f"({type(error).__name__}; its log says more)",
            )
        self._count(name, version, "succeeded", how, len(objects), started)
        log.debug(
            "conversion kind=%s version=%s objects=%d how=%s duration=%.4fs",
            name,
            version,
            len(objects),
            how,
            time.perf_counter() - started,
        )
        return success(request.uid, objects)

    def _count(
        self, name: str, version: str, result: str, how: str, objects: int, started: float
    ) -> None:
        if self.metrics is None:
            return
        self.metrics.conversion_reviews.labels(name, version, result).inc()
        if objects:
            self.metrics.conversion_objects.labels(name, how).inc(objects)
        self.metrics.conversion_seconds.labels(name, how).observe(time.perf_counter() - started)


def _version(obj: dict[str, Any]) -> str:
    api_version = obj.get("apiVersion")
    return api_version.rpartition("/")[2] if isinstance(api_version, str) else ""
