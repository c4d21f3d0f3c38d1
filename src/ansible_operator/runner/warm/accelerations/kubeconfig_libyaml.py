"""Kubeconfig files parsed by libyaml in module runs (acceleration
`kubeconfig-libyaml`).

Every kubernetes.core module (and operator_sdk.util's) loads the run's
kubeconfig with `kubernetes.config.load_kube_config`, whose KubeConfigMerger
parses the file with `yaml.safe_load`: PyYAML's pure-Python parser, ~4 ms of
CPU and ~540 page faults in a module run, ~2.6 ms and ~470 with libyaml's,
four modules a reconcile. The module interpreter, before it serves, gives
the client's kube_config module a `yaml` that is PyYAML but for `safe_load`,
which parses with libyaml's CSafeLoader (SafeLoader's constructor and
resolver over libyaml's parser: the same values) and, when libyaml fails,
parses again with the pure loader: an error is then the stock one, word for
word (a file's name in it too), and what only PyYAML's parser accepts still
loads.

libyaml is laxer than PyYAML's parser on a few texts PyYAML refuses (a tab
after a key's colon, a comment right after a block scalar's indicator, `?` in
a plain scalar of a flow collection), and loads a lone `!` tag as "" where
PyYAML gives None. So only the run's own kubeconfig (the file named in
K8S_AUTH_KUBECONFIG, which the operator writes with `yaml.safe_dump`: none of
those) is parsed by libyaml; any other text, a kubeconfig a role names
itself, is parsed by the stock loader.
"""

from __future__ import annotations

import io
import os
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Context,
    Install,
    Phase,
    Unavailable,
    require,
    used,
)

NAME = "kubeconfig-libyaml"
RUN_KUBECONFIG_ENV = "K8S_AUTH_KUBECONFIG"  # the run's kubeconfig (runner/rundir.py)


class LibyamlFirst:
    """PyYAML, as kube_config sees it through this: every attribute PyYAML's,
    but `safe_load`, which tries libyaml first."""

    def __init__(
        self,
        pure: types.ModuleType,
        parsed: Callable[[], object],
        ours: Callable[[Any], bool],
    ) -> None:
        self._pure = pure
        self._loader = pure.CSafeLoader  # looked up here: without it, nothing is replaced
        self._parsed = parsed  # called each time libyaml's parse is what is returned
        self._ours = ours  # whether a stream is one libyaml may parse

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pure, name)

    def safe_load(self, stream: Any) -> Any:
        if not self._ours(stream):
            return self._pure.safe_load(stream)
        is_file = hasattr(stream, "read")
        # Read once: the pure loader may need the text again.
        text = stream.read() if is_file else stream
        try:
            loaded = self._pure.load(text, Loader=self._loader)
        except Exception:
            # Not only YAMLError: a str libyaml cannot encode (a lone
            # surrogate) raises UnicodeEncodeError where PyYAML reports a
            # ReaderError. Whatever libyaml refuses, the stock loader decides.
            again = _reread(text, getattr(stream, "name", None)) if is_file else text
            return self._pure.safe_load(again)
        self._parsed()
        return loaded


def _reread(text: str | bytes, name: str | None) -> IO[Any]:
    """`text` as a file again, under the name PyYAML's errors give the original."""
    copy: IO[Any] = io.StringIO(text) if isinstance(text, str) else io.BytesIO(text)
    if name is not None:
        copy.name = name  # type: ignore[misc]
    return copy


def the_runs_kubeconfig(stream: Any) -> bool:
    """A file opened at the path of the run's kubeconfig (the operator's)."""
    name = getattr(stream, "name", None)
    return isinstance(name, str) and name == os.environ.get(RUN_KUBECONFIG_ENV)


def _modules() -> tuple[types.ModuleType, types.ModuleType]:
    """PyYAML and the client's kube_config module."""
    try:
        import yaml
        from kubernetes.config import kube_config
    except ImportError as error:
        raise Unavailable(f"not importable: {error}") from error
    return yaml, kube_config


def probe() -> None:
    """kube_config parses a kubeconfig file (a token user, a namespace in its
    context, as the operator writes one for runs) through its module's
    `yaml.safe_load`, and libyaml's parse, returned in its place, is what the
    pure loader gives."""
    from ansible_operator.kube.kubeconfig import build_kubeconfig, write_kubeconfig

    yaml, kube_config = _modules()
    require(getattr(yaml, "__with_libyaml__", False), "PyYAML is built without libyaml")
    require(hasattr(yaml, "CSafeLoader"), "PyYAML has no CSafeLoader")
    require(
        getattr(kube_config, "yaml", None) is yaml,
        "kubernetes.config.kube_config.yaml is not PyYAML's module",
    )
    parsed: list[bool] = []
    stock = kube_config.yaml
    with tempfile.TemporaryDirectory() as scratch:  # a probe leaves nothing behind
        path = str(Path(scratch, "kubeconfig"))
        config = build_kubeconfig("https://probe.invalid:6443", token="probe", namespace="probe")
        write_kubeconfig(Path(path), config)
        pure = yaml.safe_load(Path(path).read_text())
        kube_config.yaml = LibyamlFirst(yaml, lambda: parsed.append(True), the_runs_kubeconfig)
        outside = os.environ.get(RUN_KUBECONFIG_ENV)
        os.environ[RUN_KUBECONFIG_ENV] = path  # as in a run
        try:
            merger = kube_config.KubeConfigMerger(path)
        finally:
            kube_config.yaml = stock
            if outside is None:
                os.environ.pop(RUN_KUBECONFIG_ENV, None)
            else:
                os.environ[RUN_KUBECONFIG_ENV] = outside
    require(
        parsed == [True],
        "kubernetes.config.kube_config no longer parses a kubeconfig file with its "
        "module's yaml.safe_load, once",
    )
    loaded = getattr(merger, "config_files", {}).get(path)
    require(
        loaded == pure == config,
        "a kubeconfig parsed with libyaml (CSafeLoader) is not what yaml.safe_load gives",
    )


def install(_context: Context) -> None:
    yaml, kube_config = _modules()
    replacement = LibyamlFirst(yaml, lambda: used(NAME), the_runs_kubeconfig)
    kube_config.yaml = replacement


ACCELERATION = Acceleration(
    name=NAME,
    saves="~1.5 ms of CPU per module that loads the run's kubeconfig (kubernetes.core's, "
    "operator_sdk.util's): the file the operator wrote parsed by libyaml, not by PyYAML's "
    "pure-Python parser",
    relies_on="kubernetes.config.kube_config's KubeConfigMerger parsing a kubeconfig file "
    "with its module's yaml.safe_load; PyYAML's CSafeLoader",
    probe=probe,
    # Before the module interpreter serves: every module run inherits it.
    installs=(Install(Phase.MODULE_INTERPRETER, install),),
)
