"""`--as USER`: the operator acting as another identity (impersonation).

`run --as system:serviceaccount:NS:NAME` makes every request of the operator,
and every request the proxy forwards for a run, carry `Impersonate-User`
(KubeConfig.auth_headers), so a local run meets the RBAC of the deployed
operator. At start the API server is asked whom it takes our requests for (a
SelfSubjectReview): credentials that may not impersonate fail there, once, with
a message that says so, instead of as a 403 on every request.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import KubeConfigError
from ansible_operator.kube.types import Resource

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SELF_SUBJECT_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False
)


class ImpersonationError(KubeConfigError):
    """The local credentials may not act as the `--as` identity."""


@dataclass(frozen=True)
class Identity:
    """Whom the API server takes the requests for."""

    user: str
    groups: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.user} (groups {', '.join(self.groups) or 'none'})"


def impersonated_user(text: str) -> str:
    """The `--as` value, checked as kubectl's is not: a service account's user
    name is `system:serviceaccount:NAMESPACE:NAME`, and a typo there would
    impersonate a user no RoleBinding names, failing every request."""
    user = text.strip()
    if not user:
        raise ValueError("--as needs a user name, e.g. system:serviceaccount:NAMESPACE:NAME")
    if user.startswith(SERVICE_ACCOUNT_PREFIX):
        parts = user.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":")
        if len(parts) != 2 or not all(part.strip() for part in parts):
            raise ValueError(
                f"--as {user!r}: a service account's user name is "
                "system:serviceaccount:NAMESPACE:NAME"
            )
    return user


async def verify_impersonation(api: ApiClient) -> Identity | None:
    """Whom the API server takes `api`'s requests for, once `--as` is set.
    None when the server cannot say (SelfSubjectReview is served from
    Kubernetes 1.28 on): the first refused request will. Raises
    ImpersonationError when the credentials may not impersonate."""
    user = api.config.impersonate
    try:
        review = await api.request(
            "POST",
            SELF_SUBJECT_REVIEWS.path(),
            body={"apiVersion": SELF_SUBJECT_REVIEWS.api_version, "kind": "SelfSubjectReview"},
        )
    except ApiError as error:
        if error.status == 404:
            return None
        if error.status == 403:
            raise ImpersonationError(
                f"--as {user}: the credentials of {api.config.source or 'this cluster'} may "
                f"not act as {user} ({error.message}); use credentials allowed to impersonate "
                "it (cluster-admin is), or run without --as"
            ) from None
        raise
    info = (review.get("status") or {}).get("userInfo") or {}
    return Identity(str(info.get("username") or ""), tuple(info.get("groups") or ()))
