"""Make a development environment for one supported ansible-core minor.

    python3 scripts/ansible_env.py [MINOR] [--venv DIR] [--python newest|oldest]
                                   [--label NAME] [--dry-run]

MINOR is 2.18, 2.19, 2.20, 2.21 or `default` (2.21 when a Python 3.12+ is
found, else 2.18, saying why). The pin set: constraints.txt for 2.21,
constraints-ansible-core-2.18.txt for 2.18, and for 2.19 and 2.20
constraints.txt with only the Ansible pins replaced (PIN_SETS below). The
Python: the newest (or with --python oldest, the oldest) of python3.13,
python3.12 and python3.11 found on PATH or under $PYENV_ROOT/versions that the
minor supports. DIR (default ~/.cache/ansible-operator/venvs/ansible-core-MINOR)
is created, or recreated when it was made with another Python, and installed
through scripts/install-runtime.sh --dev (editable, with the test tools) when
its inputs changed since the last install. Says on stderr which Python and
ansible-core it used; prints the environment's python on stdout:

    python=$(python3 scripts/ansible_env.py 2.18 --python oldest)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENVS = Path.home() / ".cache" / "ansible-operator" / "venvs"
STAMP = ".installed"
# Pins that may differ between pin sets; everything else is the same in all
# of them (tests/unit/test_constraints.py keeps it so).
ANSIBLE_PINS = frozenset({"ansible", "ansible-core", "resolvelib"})
# The Pythons the pins of constraints.txt install on, newest first.
PYTHONS = ((3, 13), (3, 12), (3, 11))
# What `setup` reinstalls for when it changes (besides the pins and the Python).
INSTALL_INPUTS = (
    "pyproject.toml",
    "scripts/install-runtime.sh",
    "scripts/install_kubernetes_core.py",
)


@dataclass(frozen=True)
class PinSet:
    minor: str
    base: str  # a constraints file of the repository
    overrides: dict[str, str] = field(default_factory=dict)  # pins replaced in it
    min_python: tuple[int, int] = (3, 11)

    @property
    def file_name(self) -> str:
        """Where install-runtime.sh reads the pins: the base itself, or a file
        written into the environment when pins are overridden."""
        return f"constraints-ansible-core-{self.minor}.txt" if self.overrides else self.base

    def describe(self) -> str:
        if not self.overrides:
            return self.base
        replaced = ", ".join(f"{name} {version}" for name, version in self.overrides.items())
        return f"{self.base} with {replaced}"


PIN_SETS = {
    "2.18": PinSet("2.18", "constraints-ansible-core-2.18.txt"),
    "2.19": PinSet("2.19", "constraints.txt", {"ansible-core": "2.19.14", "ansible": "12.3.0"}),
    "2.20": PinSet(
        "2.20", "constraints.txt", {"ansible-core": "2.20.10", "ansible": "13.8.0"}, (3, 12)
    ),
    "2.21": PinSet("2.21", "constraints.txt", min_python=(3, 12)),
}
DEFAULT, FALLBACK = "2.21", "2.18"

PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s#;]+)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """{canonical name: version} of a constraints file's `name==version` lines."""
    return {canonical(m.group(1)): m.group(2) for m in map(PIN.match, text.splitlines()) if m}


def pin_text(pin_set: PinSet) -> str:
    """The constraints the minor installs with: its base file with its overrides applied."""
    path = ROOT / pin_set.base
    text = path.read_text()
    if not pin_set.overrides:
        return text
    wanted = {canonical(name): version for name, version in pin_set.overrides.items()}
    lines = []
    for line in text.splitlines():
        match = PIN.match(line)
        if match and canonical(match.group(1)) in wanted:
            line = f"{match.group(1)}=={wanted.pop(canonical(match.group(1)))}"
        lines.append(line)
    if wanted:
        raise SystemExit(f"{path}: no pin for {', '.join(sorted(wanted))} to replace")
    header = f"# Written by scripts/ansible_env.py: {pin_set.describe()}.\n"
    return header + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Interpreter:
    path: Path  # as found (PATH or pyenv)
    version: tuple[int, int, int]
    executable: str  # the real file, to tell two names of one Python apart

    @property
    def minor(self) -> tuple[int, int]:
        return self.version[:2]

    def describe(self) -> str:
        return f"Python {'.'.join(map(str, self.version))} ({self.path})"


# A base interpreter with venv and pip (Debian's python3.x without python3.x-venv has no
# ensurepip, so `-m venv` would fail later).
PROBE = (
    "import os, sys, venv, ensurepip; print(*sys.version_info[:3]); "
    "print(os.path.realpath(getattr(sys, '_base_executable', sys.executable))); "
    "print(sys.prefix != sys.base_prefix)"
)


def probe(path: Path) -> Interpreter | None:
    try:
        done = subprocess.run(
            [str(path), "-c", PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < 3 or lines[2] == "True":
        return None
    major, minor, micro = (int(part) for part in lines[0].split())
    return Interpreter(path, (major, minor, micro), lines[1])


def candidate_paths() -> list[Path]:
    names = [f"python{major}.{minor}" for major, minor in PYTHONS]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    # pyenv's shims run only the selected versions, all of which are under versions/.
    found = [
        Path(p)
        for p in map(shutil.which, [*names, "python3"])
        if p and Path(p).parent != pyenv / "shims"
    ]
    for directory in sorted((pyenv / "versions").glob("*/bin")):
        found += [directory / name for name in names if (directory / name).is_file()]
    return found


def interpreters() -> list[Interpreter]:
    """Each supported Python found, once, in the order found."""
    paths = candidate_paths()
    with ThreadPoolExecutor(max_workers=max(1, len(paths))) as pool:
        probed = list(pool.map(probe, paths))
    seen: dict[str, Interpreter] = {}
    for interpreter in probed:
        if interpreter and interpreter.minor in PYTHONS:
            seen.setdefault(interpreter.executable, interpreter)
    return list(seen.values())


def pick(found: list[Interpreter], pin_set: PinSet, which: str) -> Interpreter | None:
    """The newest (or oldest) Python the minor supports; of one Python minor,
    the newest patch release."""
    suitable = [i for i in found if i.minor >= pin_set.min_python]
    if not suitable:
        return None
    if which == "oldest":
        oldest = min(i.minor for i in suitable)
        suitable = [i for i in suitable if i.minor == oldest]
    return max(suitable, key=lambda i: i.version)


def looked_where() -> str:
    names = ", ".join(f"python{major}.{minor}" for major, minor in PYTHONS)
    pyenv = os.environ.get("PYENV_ROOT") or "~/.pyenv"
    return f"looked for {names} and python3 on PATH and in {pyenv}/versions/*/bin"


Say = Callable[[str], None]


def choose(
    minor: str, which: str, found: list[Interpreter], say: Say
) -> tuple[PinSet, Interpreter]:
    """The pin set and Python for MINOR (`default`: 2.21, or 2.18 with only Python 3.11)."""
    if minor == "default":
        newest = pick(found, PIN_SETS[DEFAULT], which)
        if newest:
            return PIN_SETS[DEFAULT], newest
        fallback = PIN_SETS[FALLBACK]
        older = pick(found, fallback, which)
        if older:
            default = PIN_SETS[DEFAULT]
            need = ".".join(map(str, default.min_python))
            say(
                f"ansible-core {DEFAULT} ({default.describe()}) needs Python {need}+ and only "
                f"{older.describe()} was found ({looked_where()}): using ansible-core "
                f"{FALLBACK} ({fallback.describe()}) instead; install Python {need} or newer "
                f"for the default"
            )
            return fallback, older
        minor = DEFAULT
    pin_set = PIN_SETS[minor]
    interpreter = pick(found, pin_set, which)
    if interpreter is None:
        need, newest = (".".join(map(str, v)) for v in (pin_set.min_python, PYTHONS[0]))
        seen = ", ".join(i.describe() for i in found) or "none"
        raise SystemExit(
            f"ansible-core {minor} needs Python {need} to {newest}; found: {seen} "
            f"({looked_where()})"
        )
    return pin_set, interpreter


def base_of(venv: Path) -> str | None:
    """The real interpreter a virtual environment was made from (None: not a
    working one)."""
    python = venv / "bin" / "python"
    code = "import os, sys; print(os.path.realpath(sys._base_executable))"
    try:
        done = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def setup(venv: Path, pin_set: PinSet, interpreter: Interpreter, say: Say) -> Path:
    """Create, recreate or refresh VENV; returns its python."""
    text = pin_text(pin_set)
    digest = hashlib.sha256()
    for part in (text, interpreter.executable, str(interpreter.version), str(ROOT)):
        digest.update(part.encode() + b"\0")
    for name in INSTALL_INPUTS:
        digest.update((ROOT / name).read_bytes() + b"\0")
    want = digest.hexdigest()[:16]
    stamp = venv / STAMP
    python = venv / "bin" / "python"
    if stamp.is_file() and stamp.read_text().strip() == want:
        return python
    if venv.exists():
        if not (venv / "pyvenv.cfg").is_file():
            raise SystemExit(f"{venv}: exists and is not a virtual environment; move it away")
        made_from = base_of(venv)
        if made_from != interpreter.executable:
            say(f"{venv} was made with {made_from or 'a Python that no longer runs'}: recreating")
            shutil.rmtree(venv)
    say(f"setting up {venv} (pinned by {pin_set.describe()})")
    if not venv.exists():
        subprocess.run([str(interpreter.path), "-m", "venv", str(venv)], check=True)
    constraints = ROOT / pin_set.base
    if pin_set.overrides:
        constraints = venv / pin_set.file_name
        constraints.write_text(text)
    stamp.unlink(missing_ok=True)
    subprocess.run(
        [str(ROOT / "scripts" / "install-runtime.sh"), str(python), "--dev"],
        check=True,
        env={**os.environ, "CONSTRAINTS": str(constraints)},
        stdout=sys.stderr,  # stdout carries only the python's path
    )
    stamp.write_text(want + "\n")
    return python


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("minor", nargs="?", default="default", choices=["default", *PIN_SETS])
    parser.add_argument("--venv", type=Path, help="default: ~/.cache/ansible-operator/venvs/...")
    parser.add_argument("--python", choices=["newest", "oldest"], default="newest")
    parser.add_argument("--label", default="ansible_env", help="prefix of the messages")
    parser.add_argument("--dry-run", action="store_true", help="say what it would use, only")
    args = parser.parse_args()

    def say(message: str) -> None:
        print(f"{args.label}: {message}", file=sys.stderr, flush=True)

    pin_set, interpreter = choose(args.minor, args.python, interpreters(), say)
    venv = args.venv or VENVS / f"ansible-core-{pin_set.minor}"
    core = pins(pin_text(pin_set))["ansible-core"]
    say(
        f"{interpreter.describe()} with ansible-core {core} ({pin_set.describe()}) in {venv}"
        + (" (dry run)" if args.dry_run else "")
    )
    if args.dry_run:
        return
    print(setup(venv, pin_set, interpreter, say))


if __name__ == "__main__":
    main()
