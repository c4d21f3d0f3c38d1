"""Extra vars of a run: snake_case names, order, collisions."""

from __future__ import annotations

import pytest

from ansible_operator.project import params

REFERENCE_CASES = {
    "sizeK8sBuckets": "size_k8s_buckets",
    "ThisShouldHaveUnderscores": "_this_should_have_underscores",
    "_CanYou_Handle_mixedVars": "_can_you_handle_mixed_vars",
    "egressIPs": "egress_ips",
    "IPsegress": "_ips_egress",
    "URLegressIPEgressHTTP": "url_egress_ip_egress_http",
    "URLsegressIPsEgressHTTPs": "_urls_egress_ips_egress_https",
    "k8s_var": "k8s_var",
    "k8s var": "k8s_var",
}


@pytest.mark.parametrize(("key", "expected"), sorted(REFERENCE_CASES.items()))
def test_to_snake_reference_cases(key: str, expected: str) -> None:
    assert params.to_snake(key) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("", ""),
        ("size", "size"),
        ("replicaCount", "replica_count"),
        ("already_snake", "already_snake"),
        ("HTTPServer", "http_server"),
        ("serverURL", "server_url"),
    ],
)
def test_to_snake_more(key: str, expected: str) -> None:
    assert params.to_snake(key) == expected


def test_snake_case_keys_recurses_keys_only() -> None:
    value = {"outerKey": {"innerKey": "someValue"}, "listKey": [{"itemKey": "camelValue"}, "x"]}
    assert params.snake_case_keys(value) == {
        "outer_key": {"inner_key": "someValue"},
        "list_key": [{"item_key": "camelValue"}, "x"],
    }


@pytest.mark.parametrize(
    ("group", "kind", "expected"),
    [
        ("cache.example.com", "Memcached", "_cache_example_com_memcached"),
        ("", "Secret", "__secret"),
        ("my-group.example.io", "FooBar", "_my_group_example_io_foobar"),
    ],
)
def test_object_var_name(group: str, kind: str, expected: str) -> None:
    assert params.object_var_name(group, kind) == expected


OBJ = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "metadata": {"name": "mc", "namespace": "ns"},
    "spec": {"sizeK8sBuckets": 3, "message": "hi", "nested": {"innerKey": "v"}},
}


def build(*, snake_case: bool = True, watch_vars=None, finalizer_vars=None) -> dict:
    """Every variable of a run, the reference's order and precedence (admission.py
    writes them to two files; a run sees them merged)."""
    cluster = params.cluster_variables(
        OBJ, group="cache.example.com", kind="Memcached", snake_case=snake_case
    )
    return {**cluster, **params.author_variables(watch_vars, finalizer_vars)}


def test_build_extravars_names_and_order() -> None:
    extravars = build()
    assert list(extravars) == [
        "size_k8s_buckets",
        "message",
        "nested",
        "ansible_operator_meta",
        "_cache_example_com_memcached",
        "_cache_example_com_memcached_spec",
    ]
    assert extravars["size_k8s_buckets"] == 3
    assert extravars["nested"] == {"inner_key": "v"}
    assert extravars["ansible_operator_meta"] == {"name": "mc", "namespace": "ns"}
    assert extravars["_cache_example_com_memcached"] == OBJ
    assert extravars["_cache_example_com_memcached_spec"] == OBJ["spec"]
    # Copies, not the object itself.
    assert extravars["_cache_example_com_memcached"] is not OBJ


def test_build_extravars_later_overwrites_earlier() -> None:
    extravars = build(
        watch_vars={"message": "from watch", "ansible_operator_meta": "w", "only_watch": 1},
        finalizer_vars={"message": "from finalizer"},
    )
    assert extravars["message"] == "from finalizer"
    assert extravars["ansible_operator_meta"] == "w"
    assert extravars["only_watch"] == 1


def test_build_extravars_without_snake_case() -> None:
    extravars = build(snake_case=False)
    assert "sizeK8sBuckets" in extravars and "size_k8s_buckets" not in extravars
    assert extravars["nested"] == {"innerKey": "v"}


def test_a_watch_marks_cluster_data_unsafe_unless_it_says_otherwise() -> None:
    from ansible_operator.kube.types import GVK
    from ansible_operator.project.watches import Watch

    assert Watch(GVK("g", "v1", "K"), None, None, {}).mark_unsafe is True


def test_build_extravars_missing_spec() -> None:
    obj = {"metadata": {"name": "s"}}
    extravars = params.cluster_variables(obj, group="", kind="Secret", snake_case=True)
    assert extravars == {
        "ansible_operator_meta": {"name": "s", "namespace": ""},
        "__secret": obj,
        "__secret_spec": {},
    }


def test_snake_case_collisions() -> None:
    spec = {
        "fooBar": 1,
        "foo_bar": 2,
        "ok": {"innerKey": 1, "inner_key": 2, "fine": 3},
        "items": [{"aB": 1, "a_b": 2}, "x", {"single": 1}],
    }
    assert params.snake_case_collisions(spec) == [
        ("spec", "fooBar", "foo_bar"),
        ("spec.ok", "innerKey", "inner_key"),
        ("spec.items[0]", "aB", "a_b"),
    ]
    assert params.snake_case_collisions({"a": 1, "bC": {"d": [1, 2]}}) == []
