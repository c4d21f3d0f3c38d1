"""The object a write's body sends, as the rules that look into writes read it."""

from __future__ import annotations

import json
from typing import Any

import yaml

from ansible_operator.proxy.exchange import Exchange
from ansible_operator.proxy.headers import APPLY_PATCH, MERGE_PATCHES, content_type


def written_document(exchange: Exchange) -> dict[str, Any] | None:
    """JSON, the YAML of an apply, or a merge patch; None for a JSON patch (a list
    of operations) and for what does not parse as an object."""
    kind = content_type(exchange.request)
    if exchange.method == "PATCH" and kind not in (APPLY_PATCH, *MERGE_PATCHES):
        return None
    try:
        document = (
            yaml.safe_load(exchange.body) if kind == APPLY_PATCH else json.loads(exchange.body)
        )
    except (ValueError, yaml.YAMLError):
        return None
    return document if isinstance(document, dict) else None
