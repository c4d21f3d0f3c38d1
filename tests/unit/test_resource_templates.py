"""The kinds a templated Kubernetes definition makes, read from its text
(lint/resource_templates.py): what `check` follows into a role's templates."""

from __future__ import annotations

import pytest

from ansible_operator.lint.resource_templates import FileRef, heads_in_text, referenced_files


@pytest.mark.parametrize(
    ("text", "heads"),
    [
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n",
            [("apps/v1", "Deployment")],
        ),
        ("kind: ConfigMap\napiVersion: v1\n", [("v1", "ConfigMap")]),
        ("apiVersion: \"v1\"\nkind: 'Secret'  # the TLS pair\n", [("v1", "Secret")]),
        (
            "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: Service\n",
            [("v1", "ConfigMap"), ("v1", "Service")],
        ),
        (
            "{% if tls %}\napiVersion: v1\nkind: Secret\n{% else %}\napiVersion: v1\n"
            "kind: ConfigMap\n{% endif %}\nmetadata:\n  name: {{ name }}\n",
            [("v1", "Secret"), ("v1", "ConfigMap")],
        ),
        (
            "{% for port in ports %}\n---\napiVersion: v1\nkind: Service\n"
            "metadata:\n  name: s-{{ port }}\n{% endfor %}\n",
            [("v1", "Service")],
        ),
        ("apiVersion: v1\nkind: {{ kind }}\n", [("v1", "{{ kind }}")]),
        # Nested `kind:` lines (an ownerReference, a volume) are not the object's.
        (
            "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    kind: Pod\n",
            [("apps/v1", "Deployment")],
        ),
        ("kind: Namespace\n", [(None, "Namespace")]),
        ("{{ whole_object | to_yaml }}", []),
    ],
)
def test_the_kind_lines_of_a_template_give_its_objects(text: str, heads: list) -> None:
    assert [(h["apiVersion"], h["kind"]) for h in heads_in_text(text)] == heads


@pytest.mark.parametrize(
    ("definition", "files"),
    [
        ("{{ lookup('template', 'cm.yaml.j2') | from_yaml }}", [FileRef("template", "cm.yaml.j2")]),
        ("{{ lookup('file', 'cm.yaml') | from_yaml_all }}", [FileRef("file", "cm.yaml")]),
        (
            "{{ query('template', 'a.j2', 'b.j2') }}",
            [FileRef("template", "a.j2"), FileRef("template", "b.j2")],
        ),
        ("{{ lookup('template', item) | from_yaml }}", None),
        ("{{ lookup('env', 'HOME') }}", []),
        ("{{ my_definition }}", []),
        ("{{ unclosed", None),
    ],
)
def test_the_files_a_definition_looks_up(definition: str, files: list | None) -> None:
    assert referenced_files(definition) == files
