"""The envelope of every review the API server sends a webhook (AdmissionReview,
ConversionReview): a JSON object of one kind and apiVersion, whose request has a uid."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def review_request(
    body: bytes, kind: str, api_version: str, error: type[ValueError]
) -> tuple[Mapping[str, Any], str]:
    """The request of a `kind` review and its uid; `error` says what is wrong."""
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as problem:
        raise error(f"the body is not JSON: {problem}") from None
    if not isinstance(review, Mapping):
        raise error("the body is not a JSON object")
    if review.get("kind") != kind or review.get("apiVersion") != api_version:
        raise error(
            f"expected kind {kind}, apiVersion {api_version}; got kind "
            f"{review.get('kind')!r}, apiVersion {review.get('apiVersion')!r}"
        )
    request = review.get("request")
    if not isinstance(request, Mapping):
        raise error(f"the {kind} has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise error("request.uid is missing")
    return request, uid
