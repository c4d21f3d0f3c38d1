"""Container images without a registry, for the local node.

Everything comes from Debian's packages and this repository:

- `debian`: a Debian rootfs made here with debootstrap (minbase), as a
  one-layer image;
- `python`: that plus python3 and pip installing system-wide, standing in for
  the `python:3.13-slim-trixie` image the project's `Dockerfile` starts FROM
  (trixie's python3 is 3.13);
- `operator`: the project's `Dockerfile`, built for real with buildah, FROM
  `python` (buildah's `--from` replaces its first FROM), in each flavour: the
  default pins (`constraints.txt`, the newest ansible-core) and ansible-core
  2.18 (`constraints-ansible-core-2.18.txt`), the same Dockerfile with
  another `CONSTRAINTS` build argument;
- `samples`: `Dockerfile.samples` on top of `operator`;
- `memcached`: Debian's `memcached` package, under the name the Memcached
  sample's role runs;
- `pause`: Debian's static `catatonit -P`, the Pods' sandbox process.

buildah keeps its images in its own store under the cache dir, no daemon: with
the kernel's overlay driver where it can (a layer holds only its changes), else
vfs (every layer a full copy: about 2x slower and 5x the disk here). It reuses
unchanged layers (`--layers`), so a rebuild after a source change redoes only
the steps after the change.
On top of that each image is keyed by its inputs (recipe, sources, parent's
key): an image whose key has not changed is not built again. An image goes to
the node as an OCI archive (`Image.archive`), imported into containerd.

An operator project's own Dockerfile (`ansible-operator cluster load --build`)
is built in the same store, so its `FROM` our published base name finds the
base built here and pulls nothing. Its steps are cached (`--layers`): after a
role edit only the `COPY` steps from roles/ on run again. It goes to the node
as an `ExportedImage` (uncompressed layers, no gzip to wait for), of which the
node imports only the blobs it lacks: the new layers, a few kilobytes.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from ansible_operator import __version__
from ansible_operator.cluster.build import cache_root
from ansible_operator.cluster.host import IMAGE_PACKAGES, ensure_packages

SUITE = "trixie"
# What the `python` image stands in for: the Dockerfile's FROM must name it.
PYTHON_UPSTREAM = "python:3.13-slim-trixie"
RECIPE_VERSION = "1"  # bump when a recipe below changes in a way its text does not show
DEFAULT_MIRROR = "http://deb.debian.org/debian"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

DEBIAN = f"localhost/ansible-operator/debian:{SUITE}"
PYTHON = f"localhost/ansible-operator/python:{SUITE}"
OPERATOR = f"ghcr.io/ansible-operator/ansible-operator:{__version__}"
SAMPLES = f"ghcr.io/ansible-operator/samples:{__version__}"
MEMCACHED = "docker.io/library/memcached:1.6-alpine"  # roles/memcached/defaults/main.yml
PAUSE = "localhost/ansible-operator/pause:catatonit"
# The image label that says which ansible-core an operator image holds.
ANSIBLE_CORE_LABEL = "io.github.ansible-operator.ansible-core"

# Docs, man pages and translations are never read in a container: the
# debian-slim images drop them the same way, for every package installed later too.
SLIM_DPKG = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""
SLIM_APT = 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n'

PYTHON_CONTAINERFILE = f"""\
FROM {DEBIAN}
# python3 with pip, installing system-wide as in the python:3-slim images. pip
# installs itself from Debian's wheel of it, so that pip can upgrade it as in
# those images (Debian's python3-pip has no RECORD: pip cannot uninstall it).
RUN apt-get update \\
 && apt-get install -y python3 python3-pip-whl ca-certificates \\
 && rm -rf /var/lib/apt/lists/* /usr/lib/python3.*/EXTERNALLY-MANAGED \\
 && wheel=$(echo /usr/share/python-wheels/pip-*.whl) \\
 && python3 "$wheel/pip" install --quiet --no-index "$wheel" \\
 && rm -rf /root/.cache
CMD ["python3"]
"""

MEMCACHED_CONTAINERFILE = f"""\
FROM {DEBIAN}
RUN apt-get update \\
 && apt-get install -y memcached \\
 && rm -rf /var/lib/apt/lists/*
USER memcache
EXPOSE 11211
ENTRYPOINT ["memcached"]
"""

PAUSE_CONTAINERFILE = """\
FROM scratch
COPY catatonit /pause
ENTRYPOINT ["/pause", "-P"]
"""


T = TypeVar("T")


class ImageError(RuntimeError):
    """An image could not be built; the message names it and its log."""


@dataclass(frozen=True)
class Flavour:
    """The base image built from the one Dockerfile with one pin set."""

    name: str  # "" for the default; else the suffix of its tags and recipe name
    constraints: str  # the pin file, relative to the repository root

    def tag(self, reference: str) -> str:
        return f"{reference}-{self.name}" if self.name else reference


DEFAULT_FLAVOUR = Flavour("", "constraints.txt")
# Operator SDK's image's ansible-core (so its templating), for operators migrating from it.
ANSIBLE_CORE_2_18 = Flavour("ansible-core-2.18", "constraints-ansible-core-2.18.txt")
FLAVOURS = (DEFAULT_FLAVOUR, ANSIBLE_CORE_2_18)

# What `ansible-operator cluster images NAME` builds (`ImageBuilder.recipe`).
RECIPES = (*(f.tag("operator") for f in FLAVOURS), "samples", "memcached", "python", "pause")


@dataclass(frozen=True)
class Image:
    name: str  # the reference Pods use
    key: str  # hash of everything it is built from
    archive: Path  # an OCI archive of it, for `ctr images import`


@dataclass(frozen=True)
class ExportedImage:
    """An image copied out of the store (buildah's `dir:` format, layers
    uncompressed), to be imported into containerd under `name`."""

    name: str  # the full reference containerd and Pods know it by
    directory: Path

    @property
    def manifest(self) -> bytes:
        return (self.directory / "manifest.json").read_bytes()

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.manifest).hexdigest()

    def blobs(self) -> list[dict[str, object]]:
        """The descriptors of its config and layers."""
        manifest = json.loads(self.manifest)
        return [manifest["config"], *manifest["layers"]]

    def blob_path(self, digest: str) -> Path:
        return self.directory / digest.split(":", 1)[1]

    def discard(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def docker_reference(name: str) -> str:
    """`name` as kubelet and containerd resolve it: `demo:1` is
    `docker.io/library/demo:1`, a name without tag gets `:latest`."""
    first, slash, _rest = name.partition("/")
    if not slash or not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name if slash else 'library/' + name}"
    last = name.rsplit("/", 1)[1]
    if "@" not in last and ":" not in last:
        name += ":latest"
    return name


def dockerfile_bases(dockerfile: Path) -> list[tuple[int, str]]:
    """(line, image) of each FROM that names an image (not an earlier stage),
    with `${ARG}`s given by the ARG lines before the first FROM."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    bases = []
    for number, line in enumerate(dockerfile.read_text().splitlines(), 1):
        words = line.split()
        if not words:
            continue
        instruction = words[0].upper()
        if instruction == "ARG" and not bases and len(words) > 1:
            name, _, default = words[1].partition("=")
            args[name] = default.strip("\"'")
        elif instruction == "FROM":
            image = next((w for w in words[1:] if not w.startswith("--")), "")
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), ""), image)
            lowered = [w.lower() for w in words]
            if "as" in lowered[2:]:
                stages.add(words[lowered.index("as", 2) + 1])
            if image and image not in stages and image != "scratch":
                bases.append((number, image))
    return bases


def _digest(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:16]


def _files_digest(root: Path, *more: str | bytes) -> str:
    """What a build context holds: each file's path, mode and bytes."""
    parts: list[str | bytes] = list(more)
    for path in source_files(root):
        mode = path.stat().st_mode & 0o777
        parts += [str(path.relative_to(root)), str(mode), path.read_bytes()]
    return _digest(*parts)


def _slug(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", name).strip("-")


def project_root() -> Path:
    return Path(__file__).resolve().parents[3]


def source_files(root: Path) -> list[Path]:
    """The files a build context holds: what git tracks or would track (so no
    .venv, .git or caches), or every file when this is no git checkout."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=False,
    )
    if listed.returncode == 0:
        names = [name for name in listed.stdout.decode().split("\0") if name]
        return sorted(root / name for name in names if (root / name).is_file())
    skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache"}
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file() and not skip.intersection(path.relative_to(root).parts)
    )


def pinned_version(constraints: Path, package: str) -> str:
    """The version a pin file (`name==version` lines) gives `package`."""
    for line in constraints.read_text().splitlines():
        name, equals, version = line.split("#", 1)[0].partition("==")
        if equals and name.strip().lower() == package:
            return version.strip()
    raise ImageError(f"{constraints}: no '{package}==' line")


def check_base(dockerfile: Path) -> None:
    """The Dockerfile must start FROM the image `python` stands in for: else
    the node would test it on another Python than the real build uses."""
    for number, line in enumerate(dockerfile.read_text().splitlines(), 1):
        words = line.split()
        if words and words[0].upper() == "FROM":
            if words[1:] != [PYTHON_UPSTREAM]:
                raise ImageError(
                    f"{dockerfile}:{number}: FROM {' '.join(words[1:])}, but the local "
                    f"stand-in base is {PYTHON_UPSTREAM} (Debian {SUITE}'s python3): "
                    "change SUITE and PYTHON_UPSTREAM in cluster/images.py with it"
                )
            return
    raise ImageError(f"{dockerfile}: no FROM line")


def storage_driver(store: Path) -> str:
    """overlay when the kernel has it and the store is not itself on overlayfs
    (inside a container, say), where overlay cannot stack; vfs otherwise."""
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "vfs"
    mounts = [line.split(" - ") for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    target, fstype = "", ""
    for before, after in mounts:
        point = before.split()[4]
        if str(store).startswith(point.rstrip("/") + "/") and len(point) >= len(target):
            target, fstype = point, after.split()[0]
    return "vfs" if fstype == "overlay" else "overlay"


def debian_mirror() -> str:
    """The Debian mirror this host's apt uses, so debootstrap goes where apt goes."""
    for source in [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]:
        if not source.is_file():
            continue
        text = source.read_text(errors="replace")
        match = re.search(r"^URIs:\s*(\S+/debian)/?\s*$", text, re.M) or re.search(
            r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)/?\s", text, re.M
        )
        if match:
            return match.group(1)
    return DEFAULT_MIRROR


def _exclusive(method: Callable[..., T]) -> Callable[..., T]:
    """One build at a time per store, across processes (a test session and the
    CLI, say): they share the build context and the tags."""

    @functools.wraps(method)
    def locked(self: ImageBuilder, *args: object, **kwargs: object) -> T:
        if self._lock_depth == 0:
            self.root.mkdir(parents=True, exist_ok=True)
            self._lock = (self.root / "lock").open("w")
            fcntl.flock(self._lock, fcntl.LOCK_EX)
        self._lock_depth += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0 and self._lock is not None:
                self._lock.close()
                self._lock = None

    return locked


class ImageBuilder:
    """Builds the images above into a buildah store under `root`."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        source: Path | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.root = root or cache_root() / "images"
        self.source = source or project_root()
        self.say = progress or (lambda message: print(message, file=sys.stderr))
        self.storage_driver = storage_driver(self.root)
        self._lock: IO[str] | None = None
        self._lock_depth = 0
        self._tools_present = False  # debootstrap, buildah, catatonit

    # ----- the images ----------------------------------------------------------
    @_exclusive
    def debian(self) -> str:
        mirror = debian_mirror()
        key = _digest(RECIPE_VERSION, SUITE, mirror, SLIM_DPKG, SLIM_APT)
        if self._fresh(DEBIAN, key):
            return key
        rootfs_tar = self._debootstrap(mirror, key)
        context = self._context_dir(DEBIAN)
        shutil.move(rootfs_tar, context / "rootfs.tar")
        (context / "Containerfile").write_text('FROM scratch\nADD rootfs.tar /\nCMD ["bash"]\n')
        try:
            self._build(DEBIAN, key, context)
        finally:
            (context / "rootfs.tar").unlink(missing_ok=True)
        return key

    @_exclusive
    def python(self) -> str:
        return self._from_text(PYTHON, PYTHON_CONTAINERFILE, parent=self.debian())

    @_exclusive
    def operator(self, flavour: Flavour = DEFAULT_FLAVOUR) -> Image:
        """The base image in `flavour`: the flavours share every layer up to
        the install step, which gets their pin file as CONSTRAINTS."""
        check_base(self.source / "Dockerfile")
        parent = self.python()
        context, tree = self._source_context()
        dockerfile = (self.source / "Dockerfile").read_text()
        name = flavour.tag(OPERATOR)
        key = _digest(RECIPE_VERSION, name, flavour.constraints, parent, dockerfile, tree)
        if not self._fresh(name, key):
            ansible_core = pinned_version(self.source / flavour.constraints, "ansible-core")
            self._build(
                name,
                key,
                context,
                "-f",
                str(context / "Dockerfile"),
                "--from",
                PYTHON,
                "--build-arg",
                f"CONSTRAINTS={flavour.constraints}",
                "--label",
                f"{ANSIBLE_CORE_LABEL}={ansible_core}",
                host_trust=True,
            )
        return self.image(name)

    @_exclusive
    def samples(self) -> Image:
        parent = self.operator().key
        context, tree = self._source_context()
        dockerfile = (self.source / "Dockerfile.samples").read_text()
        key = _digest(RECIPE_VERSION, SAMPLES, parent, dockerfile, tree)
        if not self._fresh(SAMPLES, key):
            self._build(
                SAMPLES,
                key,
                context,
                "-f",
                str(context / "Dockerfile.samples"),
                "--build-arg",
                f"BASE_IMAGE={OPERATOR}",
                host_trust=True,
            )
        return self.image(SAMPLES)

    @_exclusive
    def project(self, name: str, context: Path, flavour: Flavour = DEFAULT_FLAVOUR) -> Image:
        """An operator project's image: the Dockerfile in `context` as it is,
        FROM `operator` in `flavour` (buildah's `--from` replaces its FROM
        line). Keyed by the project's files; no layer reuse, since a RUN step
        may fetch what they do not show (`ansible-galaxy collection install`)."""
        parent = self.operator(flavour).key
        key = _files_digest(context, RECIPE_VERSION, name, parent)
        if not self._fresh(name, key):
            dockerfile = str(context / "Dockerfile")
            base = flavour.tag(OPERATOR)
            self._build(name, key, context, "-f", dockerfile, "--from", base, "--no-cache")
        return self.image(name)

    @_exclusive
    def memcached(self) -> Image:
        self._from_text(MEMCACHED, MEMCACHED_CONTAINERFILE, parent=self.debian())
        return self.image(MEMCACHED)

    @_exclusive
    def test_python(self) -> Image:
        """The python image itself, for Pods that run a Python script."""
        self.python()
        return self.image(PYTHON)

    @_exclusive
    def pause(self) -> Image:
        catatonit = shutil.which("catatonit")
        if catatonit is None:
            raise ImageError("catatonit is not installed (Debian package 'catatonit')")
        binary = Path(catatonit).read_bytes()
        key = _digest(RECIPE_VERSION, PAUSE_CONTAINERFILE, binary)
        if not self._fresh(PAUSE, key):
            context = self._context_dir(PAUSE)
            (context / "Containerfile").write_text(PAUSE_CONTAINERFILE)
            shutil.copy2(catatonit, context / "catatonit")
            self._build(PAUSE, key, context)
        return self.image(PAUSE)

    def recipe(self, name: str) -> Image:
        """The image `ansible-operator cluster images NAME` names (RECIPES)."""
        for flavour in FLAVOURS:
            if name == flavour.tag("operator"):
                return self.operator(flavour)
        if name == "python":
            return self.test_python()
        if name in RECIPES:
            built: Image = getattr(self, name)()
            return built
        raise ImageError(f"no image recipe named {name!r}; known: {', '.join(RECIPES)}")

    # ----- any image in the store -------------------------------------------------
    def published(self) -> dict[str, Callable[[], Image]]:
        """Our published image names, each with how to build it here."""
        named: dict[str, Callable[[], Image]] = {
            flavour.tag(OPERATOR): functools.partial(self.operator, flavour) for flavour in FLAVOURS
        }
        named[SAMPLES] = self.samples
        return named

    def base(self, name: str) -> Image | None:
        """Our published image `name`, built here if it is not yet; None for
        any other name."""
        build = self.published().get(name)
        if build is None:
            return None
        if not (self.source / "Dockerfile").exists():
            if self._fresh(name, self._stamp(name).get("key", "")):
                return self.image(name)
            raise ImageError(
                f"{name} is not in the local image store ({self.root}) and this "
                f"installation has no Dockerfile to build it from ({self.source}): run "
                "'ansible-operator cluster images operator' in a checkout of ansible-operator"
            )
        return build()

    def stored(self) -> list[str]:
        """The names of the images in the store."""
        listed = subprocess.run(
            self._buildah_argv("images", "--format", "{{.Name}}:{{.Tag}}"),
            capture_output=True,
            text=True,
            check=False,
        )
        return sorted({line for line in listed.stdout.split() if not line.endswith(":<none>")})

    def has(self, name: str) -> bool:
        inspected = self._buildah_argv("inspect", "--type", "image", name)
        return subprocess.run(inspected, capture_output=True, check=False).returncode == 0

    def image_id(self, name: str) -> str:
        inspected = subprocess.run(
            self._buildah_argv("inspect", "--type", "image", "--format", "{{.FromImageID}}", name),
            capture_output=True,
            text=True,
            check=False,
        )
        return inspected.stdout.strip()

    @_exclusive
    def build_dockerfile(self, name: str, context: Path) -> bool:
        """Build the Dockerfile in `context` as `name`; False when neither it
        nor its base changed since the last build. Steps are cached
        (`--layers`): a change reruns the steps from the first one it touches.

        FROM our published base uses the one in the store, built here when
        missing (no pull); once there it stays as it is, as a pulled base
        would: 'cluster images operator' rebuilds it from a changed source."""
        dockerfile = context / "Dockerfile"
        if not dockerfile.is_file():
            raise ImageError(f"{context}: no Dockerfile to build")
        parents = [self.image_id(base) for base in self._our_bases(dockerfile)]
        key = _files_digest(context, RECIPE_VERSION, name, *parents)
        if self._fresh(name, key):
            return False
        self._build(name, key, context, "-f", str(dockerfile), host_trust=True)
        return True

    def _our_bases(self, dockerfile: Path) -> Iterable[str]:
        """The FROMs of `dockerfile` naming our published images, each in the store."""
        ours = self.published()
        for number, image in dockerfile_bases(dockerfile):
            if image in ours:
                if not self.has(image):
                    self.base(image)
                yield image
            elif image.startswith(OPERATOR.rsplit("/", 1)[0] + "/"):
                raise ImageError(
                    f"{dockerfile}:{number}: FROM {image}, which this ansible-operator "
                    f"({__version__}) does not build; it builds {', '.join(ours)}: "
                    "change the FROM line to one of them"
                )

    @_exclusive
    def export(self, name: str, reference: str) -> ExportedImage:
        """Copy `name` out of the store with uncompressed layers (gzip would
        cost most of the time), for the node to import as `reference`."""
        directory = self.root / "exports" / _slug(reference)
        shutil.rmtree(directory, ignore_errors=True)
        directory.parent.mkdir(parents=True, exist_ok=True)
        self._buildah(
            "push",
            "--quiet",
            "--disable-compression",
            "--format",
            "oci",
            name,
            f"dir:{directory}",
            log=self._log(reference),
            what=f"exporting {name}",
        )
        return ExportedImage(reference, directory)

    @_exclusive
    def image(self, name: str) -> Image:
        """The OCI archive of a built image, written once per key."""
        key = self._stamp(name).get("key")
        if key is None:
            raise ImageError(f"image {name} is not built")
        archive = self.root / "archives" / f"{_slug(name)}-{key}.tar"
        if not archive.exists():
            archive.parent.mkdir(parents=True, exist_ok=True)
            for stale in archive.parent.glob(f"{_slug(name)}-*.tar"):
                stale.unlink()
            partial = archive.with_suffix(".partial")
            partial.unlink(missing_ok=True)
            self._buildah(
                "push", name, f"oci-archive:{partial}:{name}", log=self._log(name), what=name
            )
            partial.rename(archive)
        return Image(name, key, archive)

    # ----- recipes -------------------------------------------------------------
    def _from_text(self, name: str, containerfile: str, *, parent: str) -> str:
        key = _digest(RECIPE_VERSION, name, containerfile, parent)
        if not self._fresh(name, key):
            context = self._context_dir(name)
            (context / "Containerfile").write_text(containerfile)
            self._build(name, key, context)
        return key

    def _debootstrap(self, mirror: str, key: str) -> Path:
        work = self.root / "debootstrap"
        rootfs = work / "rootfs"
        shutil.rmtree(work, ignore_errors=True)
        rootfs.mkdir(parents=True)
        debs = self.root / "debs"  # downloaded packages, kept for the next debootstrap
        debs.mkdir(parents=True, exist_ok=True)
        log = self._log(DEBIAN)
        self.say(f"making a Debian {SUITE} rootfs with debootstrap from {mirror}; log: {log}")
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--cache-dir={debs}",
            SUITE,
            str(rootfs),
            mirror,
        ]
        self._run(command, log, DEBIAN)
        _slim(rootfs)
        tar = work / f"rootfs-{key}.tar"
        with tarfile.open(tar, "w", format=tarfile.PAX_FORMAT) as archive:
            for child in sorted(rootfs.iterdir()):
                archive.add(child, arcname=child.name)
        shutil.rmtree(rootfs)
        return tar

    def _source_context(self) -> tuple[Path, str]:
        """A copy of the repository's source files, and a digest of them.

        Building from a copy keeps .venv, .git and caches out of `COPY .`, and
        makes the digest exactly what the image is built from."""
        context = self.root / "context" / "source"
        files = source_files(self.source)
        parts: list[str | bytes] = []
        wanted = set()
        for path in files:
            relative = path.relative_to(self.source)
            wanted.add(relative)
            data = path.read_bytes()
            mode = path.stat().st_mode & 0o777
            parts += [str(relative), str(mode), data]
            target = context / relative
            if not (target.exists() and target.read_bytes() == data):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            target.chmod(mode)
        if context.exists():
            for path in sorted(context.rglob("*"), reverse=True):
                relative = path.relative_to(context)
                if path.is_file() and relative not in wanted:
                    path.unlink()
                elif path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
        return context, _digest(*parts)

    # ----- buildah -------------------------------------------------------------
    def _build(
        self, name: str, key: str, context: Path, *extra: str, host_trust: bool = False
    ) -> None:
        log = self._log(name)
        self.say(f"building image {name} with buildah; log: {log}")
        args = ["build", "--layers", "--isolation", "chroot", "--network", "host"]
        if host_trust and HOST_CA_BUNDLE.exists():
            # Steps that download over TLS (pip) trust what this host trusts, a
            # TLS-inspecting proxy's CA included, without it entering any layer.
            # Only FROM an image whose ca-certificates is set up: installing it
            # writes that very file.
            args += ["--volume", f"{HOST_CA_BUNDLE}:/etc/ssl/certs/ca-certificates.crt:ro"]
        self._buildah(*args, "-t", name, *extra, str(context), log=log, what=name)
        self._write_stamp(name, {"key": key})
        # Drop the layer chains no tag uses any more (the current ones stay, and
        # with them the layer cache): with vfs each is a full copy of the image.
        subprocess.run(self._buildah_argv("rmi", "--prune"), capture_output=True, check=False)

    def _fresh(self, name: str, key: str) -> bool:
        if self._stamp(name).get("key") != key:
            return False
        # The store may have been emptied behind our back: then build again.
        return (
            subprocess.run(
                self._buildah_argv("inspect", "--type", "image", name), capture_output=True
            ).returncode
            == 0
        )

    def _buildah_argv(self, *args: str) -> list[str]:
        driver = self.storage_driver
        return [
            "buildah",
            "--root",
            str(self.root / f"storage-{driver}"),
            "--runroot",
            str(self.root / f"run-{driver}"),
            "--storage-driver",
            driver,
            *args,
        ]

    def _buildah(self, *args: str, log: Path, what: str) -> None:
        self._ensure_tools()
        if shutil.which("buildah") is None:
            raise ImageError("buildah is not installed (Debian package 'buildah')")
        self._run(self._buildah_argv(*args), log, what)

    def _ensure_tools(self) -> None:
        """Under the build lock (no two apt-gets at once). On a fresh machine
        images may be built before a node brought these."""
        if not self._tools_present:
            ensure_packages(IMAGE_PACKAGES, self.say)
            self._tools_present = True

    def _run(self, argv: list[str], log: Path, what: str) -> None:
        self._ensure_tools()
        with log.open("a") as handle:
            handle.write("$ " + " ".join(argv) + "\n")
            handle.flush()
            # No cache or log lines of ours in the image: a clean environment,
            # with buildah's and debootstrap's programs (in sbin) on PATH.
            env = {**os.environ, "PATH": "/usr/local/sbin:/usr/sbin:/sbin:" + os.environ["PATH"]}
            result = subprocess.run(
                argv, stdout=handle, stderr=subprocess.STDOUT, env=env, check=False
            )
        if result.returncode != 0:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
            raise ImageError(
                f"building {what} failed (exit {result.returncode}); log: {log}\n{tail}"
            )

    # ----- files ---------------------------------------------------------------
    def _log(self, name: str) -> Path:
        directory = self.root / "logs"
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{_slug(name)}.log"

    def _context_dir(self, name: str) -> Path:
        context = self.root / "context" / _slug(name)
        shutil.rmtree(context, ignore_errors=True)
        context.mkdir(parents=True)
        return context

    def _stamp_path(self, name: str) -> Path:
        return self.root / "built" / f"{_slug(name)}.json"

    def _stamp(self, name: str) -> dict[str, str]:
        path = self._stamp_path(name)
        return json.loads(path.read_text()) if path.exists() else {}

    def _write_stamp(self, name: str, data: dict[str, str]) -> None:
        path = self._stamp_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data) + "\n")


def _slim(rootfs: Path) -> None:
    """What the debian-slim images drop, and the rules that keep it dropped."""
    (rootfs / "etc/dpkg/dpkg.cfg.d/01-slim").write_text(SLIM_DPKG)
    (rootfs / "etc/apt/apt.conf.d/01-slim").write_text(SLIM_APT)
    doomed = [p for p in (rootfs / "usr/share/doc").glob("*/*") if p.name != "copyright"]
    for directory in ("usr/share/man", "usr/share/info", "usr/share/locale", "var/lib/apt/lists"):
        doomed += [p for p in (rootfs / directory).glob("*") if p.name != "locale.alias"]
    doomed += [*(rootfs / "var/cache/apt").glob("*.bin")]
    doomed += [*(rootfs / "var/cache/apt/archives").glob("*.deb")]
    for path in doomed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
