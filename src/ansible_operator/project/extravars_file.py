"""The files a run's extra vars are written to, in forms Ansible cannot reinterpret.

A run has two sets of extra vars with no name in common (params.py): the data from
the cluster (the object's spec as variables, the object, its name), which Ansible must
never template, and the operator author's (the watch's `vars`), which it must. Each
gets a file of its own, both given to ansible-playbook with `-e @FILE`:

- the author's: JSON, as Operator SDK writes all of them (`env/extravars`);
- the cluster's (`env/cluster_vars`): YAML, every key and string double-quoted and
  marked ``!unsafe`` (the mapping as a whole, or each string: `Style`).

Why not JSON with each string wrapped as ``{"__ansible_unsafe": ...}``, as before:
Ansible reads an extra-vars file as JSON first and, when that fails for any reason,
as YAML. One malformed tag in the data (``{"__ansible_vault": {...}}``, spelled in
any case and snake_cased by us) made the JSON decoder raise, and the YAML reading
that followed took every ``__ansible_unsafe`` wrapper for a plain, trusted mapping:
the whole object became templatable. Here there is one reading only: the file is not
JSON (it starts with a comment), and in YAML the tag is the only way to mark a value,
so no key, value or shape of the data can stand for one (a key ``__ansible_vault`` is
a key; a quoted ``<<`` is no merge key). The tag sits on the mapping, not on each
string, because ansible-core 2.19+ reads a tagged scalar by YAML's plain-scalar rules
(``!unsafe "1.0"`` would be the float 1.0, ``!unsafe ""`` null), while everything
inside a tagged mapping is built as written and untrusted. ansible-core 2.18 is the
other way round: it reads a tagged scalar as written, but a tagged mapping loses what
is nested two levels down. So the tags go where the installed release reads them
back exactly (`Style`), which ansible_view.py finds by trying both on a probe.

ansible_view.py reads the cluster's file with the installed release's own loader
before a run and compares: what this writes and what Ansible reads are checked, not
assumed.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any

import yaml

HEADER = b"# ansible-operator: the cluster's data, never templated (!unsafe)\n"
UNSAFE_TAG = "!unsafe"
_STR_TAG = "tag:yaml.org,2002:str"


class Style(enum.Enum):
    """Where the ``!unsafe`` tags go: the form the installed ansible-core reads back
    exactly (ansible_view.py finds which, by reading a probe)."""

    WHOLE = "whole"  # one tag on the mapping of all the variables (ansible-core 2.19+)
    EACH = "each"  # a tag on every key and string (ansible-core 2.18)


class _Quoted(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Every string double-quoted: never a plain scalar YAML could resolve to a
    boolean, a number, null, a merge key (``<<``) or a tag."""


class _Tagged(_Quoted):
    """Every string double-quoted and tagged ``!unsafe``, mapping keys included."""


def _quoted(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(_STR_TAG, value, style='"')


def _tagged(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(UNSAFE_TAG, value, style='"')


for _dumper, _string in ((_Quoted, _quoted), (_Tagged, _tagged)):
    _dumper.add_representer(str, _string)
    # A tuple is a list to Ansible (SafeDumper has no representer for it).
    _dumper.add_representer(tuple, yaml.SafeDumper.represent_list)


def encode_cluster_vars(variables: Mapping[str, Any], style: Style) -> bytes:
    """The ``!unsafe`` YAML file of the cluster's variables."""
    body = yaml.dump(
        dict(variables),
        Dumper=_Tagged if style is Style.EACH else _Quoted,
        allow_unicode=True,
        default_flow_style=False,
        sort_keys=False,
        width=2**31 - 1,  # no folded lines: one value, one line
    )
    tag = f"{UNSAFE_TAG}\n".encode() if style is Style.WHOLE else b""
    return HEADER + tag + body.encode("utf-8")


def encode_author_vars(variables: Mapping[str, Any]) -> bytes:
    """The JSON file of the author's variables (and of a watch's cluster data when it
    says `markUnsafe: false`: the reference's behaviour, templated)."""
    return json.dumps(variables).encode()
