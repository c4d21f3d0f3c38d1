"""Compiled Jinja templates shared between warm runs (acceleration `template-cache`).

Every task is executed in a new worker process, which compiles each of the
task's templates again (Jinja parses the template, generates Python and
compiles it): about a quarter of a worker's CPU for a role such as the
Memcached sample. Warm runs keep the compiled code on disk, as Jinja's own
bytecode cache does for file templates, keyed by everything compilation
depends on: the template text, its name, the environment's syntax settings
(delimiters, whitespace handling, extensions), Ansible's backslash escaping
and the Ansible, Jinja and Python versions. A template compiled once is
loaded (`marshal`) by every later worker.

Where Ansible's environment lives and how it escapes backslashes changed in
ansible-core 2.19: `_Templating` finds the one the installed release has.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    Unavailable,
    parameters_of,
    require,
    used,
)

NAME = "template-cache"
# Jinja's own lexer settings: what its lexer cache is keyed by, and the
# settings a template's `#jinja2:` header may override.
SYNTAX_SETTINGS = (
    "block_start_string",
    "block_end_string",
    "variable_start_string",
    "variable_end_string",
    "comment_start_string",
    "comment_end_string",
    "line_statement_prefix",
    "line_comment_prefix",
    "trim_blocks",
    "lstrip_blocks",
    "newline_sequence",
    "keep_trailing_newline",
)
COMPILE_PARAMETERS = ("source", "name", "filename", "raw", "defer_init")


@dataclass(frozen=True)
class _Templating:
    """The installed release's Jinja environment class, and (2.19 and later)
    whether the template being compiled escapes backslashes, which 2.18
    does to the source text before compiling it."""

    environment: type
    escapes_backslashes: Callable[[], bool]
    debuggable_attribute: str | None


def _templating() -> _Templating:
    try:
        from ansible._internal._templating import _jinja_bits
    except ImportError:
        _jinja_bits = None
    if _jinja_bits is not None:
        compile_context = getattr(_jinja_bits, "_TemplateCompileContext", None)
        current = getattr(compile_context, "current", None)
        require(callable(current), "ansible's _TemplateCompileContext.current is missing")

        def escapes() -> bool:
            context = current(optional=True)  # type: ignore[misc]
            return bool(context and context.escape_backslashes)

        environment = getattr(_jinja_bits, "AnsibleEnvironment", None)
        require(isinstance(environment, type), "ansible's AnsibleEnvironment is missing")
        require(
            hasattr(environment, "_debuggable_template_source"),
            "AnsibleEnvironment._debuggable_template_source is missing",
        )
        return _Templating(environment, escapes, "_debuggable_template_source")  # type: ignore[arg-type]
    # ansible-core 2.18: the environment is ansible.template's, and
    # backslashes are escaped in the source text (part of the key anyway).
    from ansible import template as legacy

    environment = getattr(legacy, "AnsibleEnvironment", None)
    require(isinstance(environment, type), "ansible.template.AnsibleEnvironment is missing")
    return _Templating(environment, lambda: False, None)  # type: ignore[arg-type]


def _environment_key(environment: Any, escapes_backslashes: bool) -> tuple[object, ...]:
    autoescape = environment.autoescape
    return (
        type(environment).__qualname__,
        environment.code_generator_class.__qualname__,
        tuple(getattr(environment, name) for name in SYNTAX_SETTINGS),
        environment.optimized,
        environment.is_async,
        environment.finalize is not None,
        autoescape if isinstance(autoescape, bool) else getattr(autoescape, "__qualname__", "?"),
        tuple(sorted(environment.extensions)),
        escapes_backslashes,
    )


def cache_key(
    environment: Any,
    source: str,
    name: str | None,
    filename: str | None,
    defer_init: bool,
    escapes_backslashes: bool = False,
) -> str:
    # Here, not at the top: the operator imports this module (the list of
    # accelerations) and has no use for Jinja or Ansible itself.
    import ansible
    import jinja2

    parts = (
        sys.version,
        ansible.__version__,
        jinja2.__version__,
        _environment_key(environment, escapes_backslashes),
        name,
        filename,
        defer_init,
        source,
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def cached_compile(
    templating: _Templating, cache_dir: Path, on_hit: Callable[[], None]
) -> Callable[..., Any]:
    """The environment's compile, through the cache."""
    compile_uncached = templating.environment.compile  # type: ignore[attr-defined]
    debuggable = templating.debuggable_attribute

    def compile_cached(
        self: Any,
        source: Any,
        name: str | None = None,
        filename: str | None = None,
        raw: bool = False,
        defer_init: bool = False,
    ) -> Any:
        # Parsed nodes (expressions) and template debugging are not cached.
        if raw or not isinstance(source, str) or (debuggable and getattr(self, debuggable)):
            return compile_uncached(self, source, name, filename, raw, defer_init)
        key = cache_key(self, source, name, filename, defer_init, templating.escapes_backslashes())
        path = cache_dir / key
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
            code = marshal.loads(path.read_bytes())
            if isinstance(code, types.CodeType):
                on_hit()
                return code
        code = compile_uncached(self, source, name, filename, raw, defer_init)
        if isinstance(code, types.CodeType):
            with contextlib.suppress(OSError):
                partial = path.with_name(f"{path.name}.{os.getpid()}")
                partial.write_bytes(marshal.dumps(code))
                partial.replace(path)  # whole or not at all, for concurrent runs
        return code

    return compile_cached


def probe() -> None:
    """The environment compiles with the arguments the cache passes, and a
    template compiled through the cache and loaded back is the very code
    Jinja compiles."""
    templating = _templating()
    compile_method = getattr(templating.environment, "compile", None)
    require(callable(compile_method), "the Jinja environment has no compile")
    missing = set(COMPILE_PARAMETERS) - parameters_of(compile_method)  # type: ignore[arg-type]
    require(not missing, f"the environment's compile takes no {', '.join(sorted(missing))}")
    try:
        environment = templating.environment()
    except Exception as error:
        raise Unavailable(f"an Ansible Jinja environment cannot be made here: {error!r}") from error
    source = "{{ name | default('x') }}\\n{% for i in items %}{{ i }}{% endfor %}"
    with tempfile.TemporaryDirectory() as scratch:
        compile_cached = cached_compile(templating, Path(scratch), on_hit=lambda: None)
        stored = compile_cached(environment, source, "probe")
        loaded = compile_cached(environment, source, "probe")
        direct = templating.environment.compile(environment, source, "probe")  # type: ignore[attr-defined]
    require(
        isinstance(loaded, types.CodeType) and marshal.dumps(loaded) == marshal.dumps(direct),
        "a template loaded from the cache is not the code Jinja compiles",
    )
    require(stored is not loaded, "the cache was not read back")


def install(cache_dir: Path) -> None:
    """In this process, Ansible's Jinja environments compile through the cache."""
    templating = _templating()
    compile_cached = cached_compile(templating, cache_dir, on_hit=lambda: used(NAME))
    templating.environment.compile = compile_cached  # type: ignore[attr-defined]


ACCELERATION = Acceleration(
    name=NAME,
    saves="about a quarter of each task worker's CPU: templates compiled once, "
    "loaded by every later worker",
    relies_on="AnsibleEnvironment.compile (2.19+: ansible._internal._templating._jinja_bits, "
    "with _TemplateCompileContext; 2.18: ansible.template)",
    probe=probe,
    installs=(Install(Phase.PLAYBOOK, lambda context: install(context.scratch / "templates")),),
)
