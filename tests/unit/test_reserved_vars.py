"""Cluster data never names Ansible's own variables nor carries its tagged values."""

from __future__ import annotations

from typing import Any

import pytest
from ansible import constants

from ansible_operator.project import params, reserved_vars

GROUP, KIND = "cache.example.com", "Memcached"


def refused_paths(obj: dict[str, Any], *, snake_case: bool = True) -> list[str]:
    return [
        refusal.path
        for refusal in params.refusals(obj, group=GROUP, kind=KIND, snake_case=snake_case)
    ]


@pytest.mark.parametrize(
    ("key", "variable"),
    [
        ("ansibleBecomeExe", "ansible_become_exe"),
        ("ansibleConnection", "ansible_connection"),
        ("ansiblePythonInterpreter", "ansible_python_interpreter"),
        ("ansibleShellExecutable", "ansible_shell_executable"),
        (" ansibleBecome", "ansible_become"),  # spaces are stripped by the conversion
        ("ansible_become_exe", "ansible_become_exe"),
        ("ansibleOperatorMeta", "ansible_operator_meta"),
        ("AnsibleHost", "_ansible_host"),
        ("__ansibleVault", "__ansible_vault"),
        ("hostvars", "hostvars"),
        ("groupNames", "group_names"),
        ("inventoryHostname", "inventory_hostname"),
        ("omit", "omit"),
        ("playbookDir", "playbook_dir"),
        ("vars", "vars"),
        ("environment", "environment"),
        ("CacheExampleComMemcached", "_cache_example_com_memcached"),
        ("CacheExampleComMemcachedSpec", "_cache_example_com_memcached_spec"),
    ],
)
def test_a_spec_key_that_becomes_a_reserved_variable_is_refused(key: str, variable: str) -> None:
    refusals = params.refusals(
        {"spec": {key: "id > pwned; true", "size": 3}}, group=GROUP, kind=KIND, snake_case=True
    )

    assert [refusal.path for refusal in refusals] == [f"spec.{key}"]
    assert f"'{variable}'" in str(refusals[0])
    with pytest.raises(reserved_vars.RefusedData, match=variable):
        params.build_extravars(
            {"metadata": {"name": "x"}, "spec": {key: "id"}},
            group=GROUP,
            kind=KIND,
            snake_case=True,
            unsafe=True,
            watch_vars=None,
            finalizer_vars=None,
        )


@pytest.mark.parametrize(
    "key", ["size", "hostname", "anSible", "myAnsibleBecome", "name", "port", "groupName"]
)
def test_ordinary_spec_keys_pass(key: str) -> None:
    assert refused_paths({"spec": {key: 1}}) == []


def test_a_field_that_starts_with_ansible_is_refused_however_it_goes_on() -> None:
    assert refused_paths({"spec": {"ansibleVersionWanted2": 1, "myAnsibleBecome": 1}}) == [
        "spec.ansibleVersionWanted2"
    ]


def test_without_snake_case_the_key_as_written_is_the_variable() -> None:
    assert refused_paths({"spec": {"ansibleBecomeExe": 1}}, snake_case=False) == []
    assert refused_paths({"spec": {"ansible_become_exe": 1}}, snake_case=False) == [
        "spec.ansible_become_exe"
    ]


def test_nested_keys_are_data_not_variables() -> None:
    assert refused_paths({"spec": {"config": {"ansibleBecomeExe": "x", "hostvars": 1}}}) == []


@pytest.mark.parametrize("tag", ["__ansible_vault", "__ansible_unsafe", "__ansible_tagged"])
@pytest.mark.parametrize(
    ("where", "path"),
    [
        (lambda tagged: {"spec": {"password": tagged}}, "spec.password"),
        (lambda tagged: {"spec": {"items": [{"a": tagged}]}}, "spec.items[0].a"),
        (lambda tagged: {"status": tagged}, "status"),
        (lambda tagged: {"metadata": {"labels": tagged}}, "metadata.labels"),
    ],
)
def test_a_tagged_value_anywhere_in_the_object_is_refused(tag: str, where: Any, path: str) -> None:
    tagged = {tag: "$ANSIBLE_VAULT;1.1;AES256\n6162"}

    assert refused_paths(where(tagged)) == [f"{path}.{tag}"]


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_nesting_is_bounded_and_the_walk_survives_any_depth() -> None:
    assert refused_paths({"spec": nested(reserved_vars.MAX_DEPTH - 1)}) == []

    refusals = params.refusals({"spec": nested(50_000)}, group=GROUP, kind=KIND, snake_case=True)

    assert len(refusals) == 1
    assert f"more than {reserved_vars.MAX_DEPTH} levels" in str(refusals[0])
    assert len(str(refusals[0])) < 200  # the message names where, without 50,000 segments


def test_many_refusals_make_one_readable_message() -> None:
    spec = {f"ansibleX{index}": 1 for index in range(9)}

    message = reserved_vars.describe(
        params.refusals({"spec": spec}, group=GROUP, kind=KIND, snake_case=True)
    )

    assert message.count("spec.ansibleX") == 5
    assert message.endswith("and 4 more")


def test_every_variable_ansible_sets_for_a_task_is_reserved() -> None:
    # ansible-core's own list of the variables it sets (2.18 onwards); a new one in a
    # later release fails here rather than becoming a door.
    names = getattr(constants, "INTERNAL_STATIC_VARS", None)
    assert names, "ansible-core no longer lists its variables in INTERNAL_STATIC_VARS"
    unreserved = [
        name
        for name in sorted(names)
        if reserved_vars.reserved_variable(name, group=GROUP, kind=KIND) is None
    ]

    assert unreserved == []
