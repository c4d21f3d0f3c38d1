"""Cluster data never names Ansible's own variables or a role's, nor carries its tagged
values, however the key is spelled: the admission step (project/admission.py) on the
data as Ansible will receive it."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.project import admission, reserved_vars
from ansible_operator.project.admission import CollidingKeys, ObjectRules
from ansible_operator.project.reserved_vars import RefusedData, ReservedNames
from ansible_operator.testing.admission import SOME_ANSIBLE_NAMES, written_only

GROUP, KIND = "cache.example.com", "Memcached"
ASSIGNED = {"idout": "roles/x/tasks/main.yml:12 (register)"}


def rules(*, snake_case: bool = True, mark_unsafe: bool = True) -> ObjectRules:
    return ObjectRules(
        GROUP,
        KIND,
        snake_case=snake_case,
        mark_unsafe=mark_unsafe,
        reserved=ReservedNames(SOME_ANSIBLE_NAMES, "2.21.5", ASSIGNED),
        read_back=written_only,
    )


def refused_paths(obj: dict[str, Any], *, snake_case: bool = True) -> list[str]:
    try:
        admission.admit_object({"metadata": {"name": "x"}, **obj}, rules(snake_case=snake_case))
    except RefusedData as refused:
        return [refusal.path for refusal in refused.refusals]
    return []


@pytest.mark.parametrize(
    ("key", "variable"),
    [
        ("ansibleBecomeExe", "ansible_become_exe"),
        ("ansibleConnection", "ansible_connection"),
        ("ansiblePythonInterpreter", "ansible_python_interpreter"),
        ("ansibleShellExecutable", "ansible_shell_executable"),
        (" ansibleBecome", "ansible_become"),  # spaces are stripped by the conversion
        ("ansible_become_exe", "ansible_become_exe"),
        ("ANSIBLE_BECOME_EXE", "_ansible_become_exe"),
        ("ansibleOperatorMeta", "ansible_operator_meta"),
        ("AnsibleHost", "_ansible_host"),
        ("__ansibleVault", "__ansible_vault"),
        ("__ANSIBLE_VAULT", "__ansible_vault"),
        ("hostvars", "hostvars"),
        ("groupNames", "group_names"),
        ("inventoryHostname", "inventory_hostname"),
        ("omit", "omit"),
        ("playbookDir", "playbook_dir"),
        ("vars", "vars"),
        ("environment", "environment"),
        ("_task", "_task"),
        ("CacheExampleComMemcached", "_cache_example_com_memcached"),
        ("CacheExampleComMemcachedSpec", "_cache_example_com_memcached_spec"),
    ],
)
def test_a_spec_key_that_becomes_a_reserved_variable_is_refused(key: str, variable: str) -> None:
    with pytest.raises(RefusedData) as refused:
        admission.admit_object(
            {"metadata": {"name": "x"}, "spec": {key: "id > pwned; true", "size": 3}}, rules()
        )

    assert [refusal.path for refusal in refused.value.refusals] == [f"spec.{key}"]
    assert f"'{variable}'" in str(refused.value)


def test_a_spec_key_naming_what_the_role_assigns_is_refused_naming_the_task() -> None:
    with pytest.raises(RefusedData) as refused:
        admission.admit_object(
            {"metadata": {"name": "x"}, "spec": {"idout": {"stdout": "FORGED"}}}, rules()
        )

    assert "roles/x/tasks/main.yml:12 (register)" in str(refused.value)
    assert "specMayOverride" in str(refused.value)


@pytest.mark.parametrize(
    "key", ["size", "hostname", "anSible", "myAnsibleBecome", "name", "port", "groupName"]
)
def test_ordinary_spec_keys_pass(key: str) -> None:
    assert refused_paths({"spec": {key: 1}}) == []


def test_a_field_that_starts_with_ansible_is_refused_however_it_goes_on() -> None:
    assert refused_paths({"spec": {"ansibleVersionWanted2": 1, "myAnsibleBecome": 1}}) == [
        "spec.ansibleVersionWanted2"
    ]


def test_without_snake_case_the_key_as_written_is_the_variable_in_any_case() -> None:
    assert refused_paths({"spec": {"ansibleBecomeExe": 1}}, snake_case=False) == []
    assert refused_paths({"spec": {"ansible_become_exe": 1}}, snake_case=False) == [
        "spec.ansible_become_exe"
    ]
    assert refused_paths({"spec": {"Ansible_Become_Exe": 1}}, snake_case=False) == [
        "spec.Ansible_Become_Exe"
    ]
    assert refused_paths({"spec": {"HOSTVARS": 1}}, snake_case=False) == ["spec.HOSTVARS"]


def test_nested_keys_are_data_not_variables() -> None:
    assert refused_paths({"spec": {"config": {"ansibleBecomeExe": "x", "hostvars": 1}}}) == []


@pytest.mark.parametrize(
    "tag",
    [
        "__ansible_vault",
        "__ansible_unsafe",
        "__ansible_tagged",
        "__ANSIBLE_VAULT",
        "__AnsibleUnsafe",
    ],
)
@pytest.mark.parametrize(
    ("where", "path"),
    [
        (lambda tagged: {"spec": {"password": tagged}}, "spec.password"),
        (lambda tagged: {"spec": {"items": [{"a": tagged}]}}, "spec.items[0].a"),
        (lambda tagged: {"status": tagged}, "status"),
        (lambda tagged: {"metadata": {"name": "x", "labels": tagged}}, "metadata.labels"),
    ],
)
def test_a_tagged_value_anywhere_in_the_object_is_refused(tag: str, where: Any, path: str) -> None:
    tagged = {tag: "$ANSIBLE_VAULT;1.1;AES256\n6162"}

    assert refused_paths(where(tagged)) == [f"{path}.{tag}"]


def test_a_key_the_conversion_makes_tag_like_is_refused() -> None:
    # "_ AnsibleVault" is not one as written; converted, it is "__ansible_vault".
    paths = refused_paths({"spec": {"x": {"_ AnsibleVault": "a"}}})

    assert paths == ["x.__ansible_vault"]  # the variable; the object keeps the key as written


def test_a_lone_surrogate_is_not_text_and_is_refused() -> None:
    assert refused_paths({"spec": {"a": "x\ud800y"}}) == ["spec.a"]
    assert refused_paths({"spec": {"b": {"\udfffkey": 1}}}) == ["spec.b"]


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_nesting_is_bounded_and_the_walk_survives_any_depth() -> None:
    assert refused_paths({"spec": nested(reserved_vars.MAX_DEPTH - 1)}) == []

    with pytest.raises(RefusedData) as refused:
        admission.admit_object({"metadata": {"name": "x"}, "spec": nested(50_000)}, rules())

    assert len(refused.value.refusals) == 1
    assert f"more than {reserved_vars.MAX_DEPTH} levels" in str(refused.value)
    assert len(str(refused.value)) < 200  # the message names where, without 50,000 segments


def test_managed_fields_do_not_count_toward_the_depth() -> None:
    deep = nested(reserved_vars.MAX_DEPTH - 3)
    # The API server's record of those fields, a few levels deeper than the data.
    managed = [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:x": nested(98)}}}]

    assert refused_paths({"metadata": {"name": "x", "managedFields": managed}, "spec": deep}) == []


def test_many_refusals_make_one_readable_message() -> None:
    spec = {f"ansibleX{index}": 1 for index in range(9)}

    with pytest.raises(RefusedData) as refused:
        admission.admit_object({"metadata": {"name": "x"}, "spec": spec}, rules())

    message = str(refused.value)
    assert message.count("spec.ansibleX") == 5
    assert message.endswith("and 4 more")


def test_keys_colliding_after_conversion_make_the_spec_invalid() -> None:
    with pytest.raises(CollidingKeys) as collided:
        admission.admit_object(
            {"metadata": {"name": "x"}, "spec": {"fooBar": 1, "foo_bar": 2}}, rules()
        )

    assert collided.value.reason == "InvalidSpec"
    assert "'fooBar' and 'foo_bar'" in str(collided.value)


def test_the_authors_vars_win_and_each_name_is_in_one_file_only() -> None:
    variables = admission.admit_object(
        {"metadata": {"name": "x"}, "spec": {"size": 3, "image": "{{ x }}"}},
        rules(),
        watch_vars={"size": "{{ 1 + 2 }}", "extra": "kept"},
    )

    assert variables.author == {"size": "{{ 1 + 2 }}", "extra": "kept"}
    assert variables.cluster is not None
    assert "size" not in variables.cluster.variables
    assert variables.cluster.variables["image"] == "{{ x }}"
    assert variables.merged()["size"] == "{{ 1 + 2 }}"


def test_mark_unsafe_false_hands_everything_to_the_authors_file() -> None:
    variables = admission.admit_object(
        {"metadata": {"name": "x"}, "spec": {"image": "{{ x }}"}}, rules(mark_unsafe=False)
    )

    assert variables.cluster is None
    assert variables.author["image"] == "{{ x }}"
