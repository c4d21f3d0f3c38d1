"""Reading what an operator produced, for assertions: a ConfigMap's data, an object's Events."""

from __future__ import annotations

from kubernetes import client


def config_map(api: client.ApiClient, namespace: str, name: str) -> dict[str, str] | None:
    """The ConfigMap's data ({} when it has none), or None when it does not exist."""
    try:
        return client.CoreV1Api(api).read_namespaced_config_map(name, namespace).data or {}
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def events_for(api: client.ApiClient, namespace: str, name: str) -> list[client.CoreV1Event]:
    """Events about the object called `name` in `namespace`."""
    return [
        event
        for event in client.CoreV1Api(api).list_namespaced_event(namespace).items
        if event.involved_object.name == name
    ]
