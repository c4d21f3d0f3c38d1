"""HarborServerConfiguration's image rewriting rules between its two versions.

v1alpha1 (the hub, what the roles read): `{registryRegex: "^docker.io$", project: "p"}` or
`{registryRegex: ..., proxyCache: "entry"}`. v1beta1, as goharbor.io's v1beta1 writes
them: `"^docker.io$,p"` or `"^docker.io$,proxyCache=entry"`. A regular expression may
hold commas, a project or entry name none: a string is cut at its last comma. Both ways
give back exactly what they were given, so objects round-trip through either version.
"""

from __future__ import annotations

from typing import Any

PROXY_CACHE = "proxyCache="


def rule_as_string(rule: Any) -> Any:
    if not isinstance(rule, dict) or "registryRegex" not in rule:
        return rule
    if "proxyCache" in rule:
        return f"{rule['registryRegex']},{PROXY_CACHE}{rule['proxyCache']}"
    return f"{rule['registryRegex']},{rule.get('project', '')}"


def rule_as_object(rule: Any) -> Any:
    if not isinstance(rule, str) or "," not in rule:
        return rule
    regex, _, destination = rule.rpartition(",")
    if destination.startswith(PROXY_CACHE):
        return {"registryRegex": regex, "proxyCache": destination[len(PROXY_CACHE) :]}
    return {"registryRegex": regex, "project": destination}


def rewrite_rules_converted(objects: list[Any], api_version: str, to_hub: bool) -> list[Any]:
    """Each object in `api_version`, its spec.rules written as that version writes them."""
    convert = rule_as_object if to_hub else rule_as_string
    out = []
    for obj in objects:
        obj = {**obj, "apiVersion": api_version}
        spec = obj.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("rules"), list):
            obj["spec"] = {**spec, "rules": [convert(rule) for rule in spec["rules"]]}
        out.append(obj)
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rewrite_rules_converted": rewrite_rules_converted}
