"""Compiled Jinja templates shared between warm runs.

Every task is executed in a new worker process, which compiles each of the
task's templates again (Jinja parses the template, generates Python and
compiles it): about a quarter of a worker's CPU for a role such as the
Memcached sample. Warm runs keep the compiled code on disk, as Jinja's own
bytecode cache does for file templates, keyed by everything compilation
depends on: the template text, its name, the environment's syntax settings
(delimiters, whitespace handling, extensions), Ansible's backslash escaping
and the Ansible, Jinja and Python versions. A template compiled once is
loaded (`marshal`) by every later worker.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import sys
import types
from pathlib import Path
from typing import Any

import jinja2


def _environment_key(environment: Any) -> tuple[object, ...]:
    from ansible._internal._templating._jinja_bits import (
        _TEMPLATE_OVERRIDE_FIELD_NAMES,
        _TemplateCompileContext,
    )

    context = _TemplateCompileContext.current(optional=True)
    autoescape = environment.autoescape
    return (
        type(environment).__qualname__,
        environment.code_generator_class.__qualname__,
        tuple(getattr(environment, name) for name in _TEMPLATE_OVERRIDE_FIELD_NAMES),
        environment.optimized,
        environment.is_async,
        environment.finalize is not None,
        autoescape if isinstance(autoescape, bool) else getattr(autoescape, "__qualname__", "?"),
        tuple(sorted(environment.extensions)),
        bool(context and context.escape_backslashes),
    )


def cache_key(
    environment: Any, source: str, name: str | None, filename: str | None, defer_init: bool
) -> str:
    import ansible

    parts = (
        sys.version,
        ansible.__version__,
        jinja2.__version__,
        _environment_key(environment),
        name,
        filename,
        defer_init,
        source,
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def install(cache_dir: Path) -> None:
    """In this process, Ansible's Jinja environments compile through the cache."""
    from ansible._internal._templating._jinja_bits import AnsibleEnvironment

    compile_uncached = AnsibleEnvironment.compile

    def compile_cached(
        self: Any,
        source: Any,
        name: str | None = None,
        filename: str | None = None,
        raw: bool = False,
        defer_init: bool = False,
    ) -> Any:
        # Parsed nodes (expressions) and template debugging are not cached.
        if raw or not isinstance(source, str) or self._debuggable_template_source:
            return compile_uncached(self, source, name, filename, raw, defer_init)
        path = cache_dir / cache_key(self, source, name, filename, defer_init)
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
            code = marshal.loads(path.read_bytes())
            if isinstance(code, types.CodeType):
                return code
        code = compile_uncached(self, source, name, filename, raw, defer_init)
        if isinstance(code, types.CodeType):
            with contextlib.suppress(OSError):
                partial = path.with_name(f"{path.name}.{os.getpid()}")
                partial.write_bytes(marshal.dumps(code))
                partial.replace(path)  # whole or not at all, for concurrent runs
        return code

    AnsibleEnvironment.compile = compile_cached  # type: ignore[method-assign]
