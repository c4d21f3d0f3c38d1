"""Cluster data stays data, over objects no one listed: Hypothesis builds object trees
whose keys are every case, separator and nesting variant of every reserved name and tag
(Ansible's own, read from the installed ansible-core; ours; a role's), whose values
carry Jinja and vault payloads, and runs each through the real admission step and the
installed ansible-core's real loader.

The property, for every object: it is refused, or what Ansible reads from the run's
files is the object's data, every key and string of it untrusted (never templated),
nothing vaulted or tagged, and no variable named outside the names the object may set.
The check of what Ansible read uses ansible-core's own API, not the runtime's.

Runs on every supported release (./dev test's stages). On a failure, Hypothesis prints
the smallest example it found and the seed to replay it (`--hypothesis-seed=N`).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ansible_operator.project import admission, ansible_names, params
from ansible_operator.project.admission import ObjectRules, RunVariables
from ansible_operator.project.reserved_vars import RefusedData, ReservedNames

GROUP, KIND = "shop.example.com", "Cart"
OURS = {
    "ansible_operator_meta",
    params.object_var_name(GROUP, KIND),
    f"{params.object_var_name(GROUP, KIND)}_spec",
}
ASSIGNED = {"idout": "roles/cart/tasks/main.yml:3 (register)", "gate_state": "x.yml:1 (set_fact)"}
TAGS = ["__ansible_vault", "__ansible_unsafe", "__ansible_tagged", "__ansible_module"]
PAYLOADS = [
    "{{ lookup('pipe', 'id > /tmp/pwned-generated') }}",
    "{% for x in range(3) %}{{ x }}{% endfor %}",
    "{# comment #}{{ 7 * 7 }}",
    "$ANSIBLE_VAULT;1.1;AES256\n6162636465",
    "!unsafe {{ x }}",
    "*alias",
    "<<",
    "",
    "1.0",
    "yes",
    "null",
    "\u2028{{ x }}\x00",
]
NAMES = ansible_names.reserved_by_ansible()


def words(name: str) -> list[str]:
    return [word for word in re.split(r"_+", name) if word]


def spellings(name: str) -> st.SearchStrategy[str]:
    """`ansible_become_exe` as people and attackers write it: ansibleBecomeExe,
    AnsibleBecomeExe, ANSIBLE_BECOME_EXE, ansible-become-exe, ' ansible become exe', ..."""
    parts = words(name) or [name]
    leading = name[: len(name) - len(name.lstrip("_"))]

    def join(separator: str, style: str, case: list[bool], pad: str) -> str:
        if style == "camel":
            text = parts[0] + "".join(part.capitalize() for part in parts[1:])
        elif style == "pascal":
            text = "".join(part.capitalize() for part in parts)
        else:
            text = separator.join(parts)
        if style == "random":
            text = "".join(
                char.upper() if flip else char for char, flip in zip(text, case, strict=False)
            )
        elif style == "upper":
            text = text.upper()
        return pad + leading + text + pad.rstrip()

    return st.builds(
        join,
        st.sampled_from(["_", "-", " ", "__", ".", ""]),
        st.sampled_from(["snake", "camel", "pascal", "upper", "random"]),
        st.lists(st.booleans(), min_size=len(name), max_size=len(name)),
        st.sampled_from(["", " ", "  "]),
    )


RESERVED = sorted({*NAMES.names, *TAGS, *OURS, *ASSIGNED, "ansible_python_interpreter"})
keys = st.one_of(
    st.sampled_from(RESERVED).flatmap(spellings),
    st.text(min_size=0, max_size=12),
    st.sampled_from(["size", "name", "serverURL", "x", "HTTPProxy"]),
)
scalars = st.one_of(
    st.sampled_from(PAYLOADS),
    st.text(max_size=20),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=25,
)
objects = st.builds(
    lambda spec, status, labels, name: {
        "apiVersion": f"{GROUP}/v1",
        "kind": KIND,
        "metadata": {"name": name, "namespace": "team", "labels": labels},
        "spec": spec,
        "status": status,
    },
    st.dictionaries(keys, trees, max_size=6),
    trees,
    st.dictionaries(keys, st.text(max_size=10), max_size=3),
    st.sampled_from(["cart", "{{ lookup('pipe', 'id') }}", "__ansible_vault"]),
)


class Ansible:
    """The installed ansible-core's loader and its own word on trust, read directly."""

    def __init__(self) -> None:
        import inspect

        from ansible.parsing.dataloader import DataLoader

        self.loader_class = DataLoader
        options = inspect.signature(DataLoader.load_from_file).parameters
        self.options = {"trusted_as_template": True} if "trusted_as_template" in options else {}

    def read(self, files: RunVariables) -> dict[str, Any]:
        """Every variable, as `-e @cluster_vars -e @extravars` gives them to a play."""
        read: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as directory:
            assert files.cluster is not None
            path = Path(directory, "cluster_vars")
            path.write_bytes(files.cluster.encoded)
            read.update(self.loader_class().load_from_file(str(path), cache="none", **self.options))
        read.update(files.author)  # the author's: trusted, written by the operator
        return read

    @staticmethod
    def templatable(value: Any) -> bool:
        try:
            from ansible.template import is_trusted_as_template

            return bool(is_trusted_as_template(value))
        except ImportError:
            from ansible.utils.unsafe_proxy import AnsibleUnsafe

            return not isinstance(value, AnsibleUnsafe)

    @staticmethod
    def tagged(value: Any) -> bool:
        try:
            from ansible.module_utils._internal._datatag import AnsibleTagHelper

            kinds = {kind.__name__ for kind in AnsibleTagHelper.tag_types(value)}
            return bool(kinds - {"Origin", "TrustedAsTemplate"})
        except ImportError:
            from ansible.parsing.yaml.objects import AnsibleVaultEncryptedUnicode

            return isinstance(value, AnsibleVaultEncryptedUnicode)


ANSIBLE = Ansible()


def reserved(name: str) -> bool:
    folded = name.casefold()
    return (
        folded.startswith(("ansible_", "_ansible_", "__ansible"))
        or folded in {each.casefold() for each in NAMES.names}
        or folded in ASSIGNED
        or folded.startswith(params.object_var_name(GROUP, KIND))
    )


def every_value(value: Any, path: str = "") -> list[tuple[str, Any]]:
    found = [(path, value)]
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((f"{path}.key({key!r})", key))
            found += every_value(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += every_value(item, f"{path}[{index}]")
    return found


@pytest.mark.parametrize("snake_case", [True, False])
@settings(
    max_examples=250,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(obj=objects)
def test_every_object_is_refused_or_reaches_ansible_as_untrusted_data(
    obj: dict[str, Any], snake_case: bool
) -> None:
    rules = ObjectRules(
        GROUP,
        KIND,
        snake_case=snake_case,
        mark_unsafe=True,
        reserved=ReservedNames(NAMES.names, NAMES.version, ASSIGNED),
    )
    try:
        files = admission.admit_object(obj, rules, watch_vars={"registry": "{{ host }}"})
    except RefusedData:
        event("refused")
        return
    event("admitted")
    assert_read_as_data(obj, files, snake_case)


def assert_read_as_data(obj: dict[str, Any], files: RunVariables, snake_case: bool) -> None:
    read = ANSIBLE.read(files)

    spec = obj["spec"]
    may_set = {params.to_snake(key) if snake_case else key for key in spec} | OURS | {"registry"}
    assert set(read) <= may_set
    assert not [name for name in read if name not in OURS and reserved(name)]
    for name, value in read.items():
        if name == "registry":
            continue  # the author's
        for path, each in every_value(value, name):
            assert not ANSIBLE.tagged(each), path
            if isinstance(each, str):
                assert not ANSIBLE.templatable(each), f"{path} = {each!r} is templatable"
    # And it is the object's data, as written.
    assert read[params.object_var_name(GROUP, KIND)] == obj


# What no rule refuses: keys no reserved name folds to, at any depth.
plain_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789 -.:/", max_size=10)
plain_trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(plain_keys.map(lambda key: f"k{key}"), children, max_size=5),
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, print_blob=True)
@given(
    spec=st.dictionaries(plain_keys.map(lambda key: f"field{key}"), plain_trees, max_size=6),
    status=plain_trees,
)
def test_every_object_without_a_reserved_key_is_admitted_and_read_back_as_written(
    spec: dict[str, Any], status: Any
) -> None:
    """The other half: the admission is no wall that refuses what it should carry."""
    obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": KIND,
        "metadata": {"name": "cart", "namespace": "team"},
        "spec": spec,
        "status": status,
    }
    rules = ObjectRules(
        GROUP,
        KIND,
        snake_case=False,  # the conversion's collisions are a refusal of their own
        mark_unsafe=True,
        reserved=ReservedNames(NAMES.names, NAMES.version, ASSIGNED),
    )

    files = admission.admit_object(obj, rules)

    assert_read_as_data(obj, files, snake_case=False)
    assert {key: value for key, value in ANSIBLE.read(files).items() if key in spec} == spec
