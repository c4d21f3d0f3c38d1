"""A run's cluster data as the installed ansible-core reads it, compared with what
was written.

extravars_file.py writes the cluster's variables in a form Ansible should read back
exactly; this checks that it does, with Ansible's own loader (the call
`ansible-playbook -e @FILE` makes), before a run: every key and string is untrusted
(Ansible will not template it), nothing is a vaulted or otherwise tagged value, and
no variable, key or value is other than written. A release whose loader reads the
file otherwise (a new fallback, a tag treated differently) is so caught before it
runs anything, whatever the data.

ansible-core is imported on first use (~8 MB, ~0.3 s), not at the operator's start.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import inspect
import math
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ansible_operator.project.extravars_file import Style, encode_cluster_vars
from ansible_operator.project.reserved_vars import Refusal, RefusedData

_lock = threading.Lock()  # ansible-core's loader keeps state; admissions run in threads


class _View:
    """What the installed ansible-core offers for reading and inspecting variables."""

    def __init__(self) -> None:
        from ansible.parsing.dataloader import DataLoader
        from ansible.release import __version__

        self.version = __version__
        self.loader_class = DataLoader
        # 2.19+ marks what `-e @FILE` reads as trusted templates; the CLI says so. And
        # the copy it makes of what it read (`unsafe=False`: a deepcopy, most of the
        # cost on 2.21) changes nothing of it: skipped.
        parameters = inspect.signature(DataLoader.load_from_file).parameters
        self.file_options: dict[str, bool] = {"unsafe": True} if "unsafe" in parameters else {}
        if "trusted_as_template" in parameters:
            self.file_options["trusted_as_template"] = True
        self.trusted, self.tagged = _inspectors()

    def read(self, text: bytes) -> Any:
        """`text` read as `ansible-playbook -e @FILE` reads it (a fresh loader: no cache)."""
        descriptor, path = tempfile.mkstemp(prefix="extravars-", suffix=".yml")
        try:
            with os.fdopen(descriptor, "wb") as file:  # 0600: cluster data, kept for a moment
                file.write(text)
            return self.loader_class().load_from_file(path, cache="none", **self.file_options)
        finally:
            Path(path).unlink(missing_ok=True)


def _inspectors() -> tuple[Callable[[Any], bool], Callable[[Any], list[str]]]:
    """(trusted: may Ansible template this string?, tagged: its tags beyond where it
    came from and whether it is trusted) for the installed release."""
    try:  # 2.19+: data tagging
        from ansible.module_utils._internal._datatag import AnsibleTagHelper
        from ansible.template import is_trusted_as_template

        expected = {"Origin", "TrustedAsTemplate"}

        def tags(value: Any) -> list[str]:
            return sorted(
                kind.__name__
                for kind in AnsibleTagHelper.tag_types(value)
                if kind.__name__ not in expected
            )

        return is_trusted_as_template, tags
    except ImportError:  # 2.18: unsafe is a type; so is a vaulted value
        from ansible.parsing.yaml.objects import AnsibleVaultEncryptedUnicode
        from ansible.utils.unsafe_proxy import AnsibleUnsafe

        def trusted(value: Any) -> bool:
            return not isinstance(value, AnsibleUnsafe)

        def types(value: Any) -> list[str]:
            return ["vault"] if isinstance(value, AnsibleVaultEncryptedUnicode) else []

        return trusted, types


_view: _View | None = None


def view() -> _View:
    global _view
    with _lock:
        if _view is None:
            _view = _View()
        return _view


def release() -> str:
    """The installed ansible-core's version, as the refusals name it."""
    return view().version


# What a release must read back exactly for a style to be used: strings YAML's plain
# rules would read otherwise, keys of every kind, and nesting (2.18 loses it in WHOLE).
PROBE: dict[str, Any] = {
    "text": "{{ lookup('pipe', 'id') }}",
    "plain": ["", "1.0", "yes", "null", "~", "<<", "=", "0x1F", "2001-01-01", "!x", "*a"],
    "nested": {"1": {"<<": [{"__ansible_vault": "x", "yes": {"": "deep"}}]}},
    "scalars": [1, 2.5, True, None],
}


class ExtraVars(NamedTuple):
    """The cluster's variables of a run and their file, read back exactly."""

    variables: dict[str, Any]
    encoded: bytes


@functools.cache
def chosen_style() -> Style | None:
    """The style the installed release reads back exactly (None: neither)."""
    current = view()
    return next((style for style in Style if not _differences(PROBE, style, current)), None)


def read_exactly(cluster_vars: dict[str, Any]) -> ExtraVars:
    """`cluster_vars` and their file, once the installed ansible-core has read the file
    back exactly (RefusedData naming what it reads otherwise)."""
    style = chosen_style()
    current = view()
    if style is None:
        raise RefusedData(
            [
                Refusal(
                    "(extra vars)",
                    f"ansible-core {current.version} reads neither form of unsafe data "
                    "exactly, so no data from the cluster can reach its runs",
                )
            ]
        )
    encoded = encode_cluster_vars(cluster_vars, style)
    digest = hashlib.sha256(encoded).digest()
    if digest not in _read_back:
        found = _differences(cluster_vars, style, current, encoded)
        if found:
            raise RefusedData(found)
    _remember(digest)
    return ExtraVars(cluster_vars, encoded)


# Files read back exactly before, by digest: Ansible's loader costs ~10 ms of CPU on a
# small object (2.21), and periodic reconciles of an unchanged object write the same
# file again (the encoding is deterministic and one-to-one, so the same text means the
# same variables, read the same way by the same release).
_READ_BACK_KEPT = 4096
_read_back: collections.OrderedDict[bytes, None] = collections.OrderedDict()


def _remember(digest: bytes) -> None:
    with _lock:
        _read_back[digest] = None
        _read_back.move_to_end(digest)
        while len(_read_back) > _READ_BACK_KEPT:
            _read_back.popitem(last=False)


def _differences(
    cluster_vars: Mapping[str, Any], style: Style, current: _View, encoded: bytes | None = None
) -> list[Refusal]:
    text = encoded if encoded is not None else encode_cluster_vars(cluster_vars, style)
    with _lock:
        try:
            loaded = current.read(text)
        except Exception as error:  # whatever the reason, the run cannot have this data
            return [
                Refusal(
                    "(extra vars)",
                    f"ansible-core {current.version} cannot read them ({type(error).__name__})",
                )
            ]
    found: list[Refusal] = []
    _compare(loaded, cluster_vars, "", current, found)
    return found


_ENOUGH = 20  # differences named: enough to say what is wrong


def _say(path: str, what: str, version: str) -> Refusal:
    return Refusal(path or "(extra vars)", f"ansible-core {version} reads it {what}")


def _compare(loaded: Any, meant: Any, path: str, current: _View, found: list[Refusal]) -> None:
    version = current.version
    if len(found) >= _ENOUGH:
        return
    extra = current.tagged(loaded)
    if extra:
        found.append(_say(path, f"as a tagged value ({', '.join(extra)})", version))
    elif isinstance(meant, Mapping):
        if not isinstance(loaded, Mapping):
            found.append(_say(path, f"as {type(loaded).__name__}, not a mapping", version))
            return
        read_keys = {str(key): key for key in loaded}
        for key in read_keys.keys() - {str(key) for key in meant}:
            found.append(_say(_child(path, key), "with a key that was not written", version))
        for key, value in meant.items():
            child = _child(path, key)
            read_key = read_keys.get(str(key))
            if read_key is None:
                found.append(_say(child, "without this key", version))
            elif current.trusted(read_key):
                found.append(_say(child, "with this key trusted as a template", version))
            else:
                _compare(loaded[read_key], value, child, current, found)
    elif isinstance(meant, list | tuple):
        if not isinstance(loaded, list) or len(loaded) != len(meant):
            found.append(_say(path, "as another list", version))
            return
        for index, (got, want) in enumerate(zip(loaded, meant, strict=True)):
            _compare(got, want, f"{path}[{index}]", current, found)
    elif isinstance(meant, str):
        if not isinstance(loaded, str) or str(loaded) != meant:
            found.append(_say(path, "as another value", version))
        elif current.trusted(loaded):
            found.append(_say(path, "as a trusted template, not as data", version))
    elif not _same_scalar(loaded, meant):
        found.append(_say(path, "as another value", version))


def _same_scalar(loaded: Any, meant: Any) -> bool:
    if isinstance(meant, bool) or meant is None:
        return loaded is meant
    if isinstance(meant, int):
        return isinstance(loaded, int) and not isinstance(loaded, bool) and loaded == meant
    if isinstance(meant, float):
        return isinstance(loaded, float) and (
            loaded == meant or (math.isnan(loaded) and math.isnan(meant))
        )
    return False  # the cluster's JSON holds nothing else


def _child(path: str, key: object) -> str:
    text = str(key)
    if text.isidentifier():
        return f"{path}.{text}" if path else text
    return f"{path}[{text!r}]"
