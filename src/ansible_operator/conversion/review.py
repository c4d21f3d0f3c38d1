"""The ConversionReview the API server sends a conversion webhook, and the answer.

    {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
     "request": {"uid": ..., "desiredAPIVersion": "goharbor.io/v1beta1", "objects": [...]}}

The answer carries the request's uid and either every object converted, in order, with
`result.status: Success`, or `result.status: Failure` and a message, which the API server
passes on to its client ("conversion webhook for goharbor.io/v1alpha3, Kind=HarborCluster
failed: MESSAGE"): the message names the watches.yaml entry and the problem, never a
value of the objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_operator.serving.reviews import review_request

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"


class ReviewError(ValueError):
    """The body is no ConversionReview request we can answer."""


@dataclass(frozen=True)
class ConversionRequest:
    uid: str
    desired_api_version: str
    objects: list[dict[str, Any]]

    @property
    def desired_version(self) -> str:
        return self.desired_api_version.rpartition("/")[2]

    @property
    def desired_group(self) -> str:
        return self.desired_api_version.rpartition("/")[0]


def parse_review(body: bytes) -> ConversionRequest:
    request, uid = review_request(body, "ConversionReview", REVIEW_API_VERSION, ReviewError)
    desired = request.get("desiredAPIVersion")
    if not isinstance(desired, str) or "/" not in desired:
        raise ReviewError("request.desiredAPIVersion must be GROUP/VERSION")
    objects = request.get("objects")
    if objects is None:
        objects = []
    if not isinstance(objects, list) or not all(isinstance(obj, dict) for obj in objects):
        raise ReviewError("request.objects must be a list of objects")
    return ConversionRequest(uid, desired, objects)


def success(uid: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _review({"uid": uid, "convertedObjects": objects, "result": {"status": "Success"}})


def failure(uid: str, message: str) -> dict[str, Any]:
    return _review({"uid": uid, "result": {"status": "Failure", "message": message}})


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}
