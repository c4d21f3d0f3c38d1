"""`ansible-operator cluster load`: images into the local node's containerd,
with no registry in between.

An IMAGE is an OCI or docker archive file, one of our published base images
(built here when missing), or any image in ansible-operator's buildah store
(`--build DIR` puts one there from DIR's Dockerfile, FROM our base images as
built here). Each step says how long it took: the edit loop is made of them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ansible_operator.cluster.images import ImageBuilder, ImageError, docker_reference
from ansible_operator.cluster.node import NODE_NAME, LocalNode, running_node


class LoadError(ImageError):
    """An image to load could not be found or built; the message says what to do."""


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "images",
        nargs="+",
        metavar="IMAGE",
        help="an image name in ansible-operator's image store (our published base images "
        "are built there when missing), or an OCI or docker archive file; with --build, "
        "the name to give the image built",
    )
    parser.add_argument(
        "--build",
        type=Path,
        metavar="DIR",
        help="first build DIR's Dockerfile into the store as IMAGE (FROM our base image "
        "as built here: no pull; unchanged steps are reused)",
    )
    parser.add_argument(
        "--no-load",
        action="store_true",
        help="with --build: only build (no node needed)",
    )


def _say(message: str) -> None:
    print(f"ansible-operator: {message}", file=sys.stderr)


def cluster_load(args: argparse.Namespace) -> int:
    if args.build is not None and len(args.images) != 1:
        _say("--build takes one IMAGE: the name to give the image it builds")
        return 2
    if args.no_load and args.build is None:
        _say("--no-load only goes with --build")
        return 2
    node = None if args.no_load else running_node()  # fail before a long build
    builder = ImageBuilder(progress=_say)
    if args.build is not None:
        build(builder, args.build, args.images[0])
    if node is None:
        return 0
    for image in args.images:
        load_one(builder, node, image)
    return 0


def build(builder: ImageBuilder, context: Path, name: str) -> None:
    started = time.monotonic()
    if builder.build_dockerfile(name, context.resolve()):
        _say(f"built {name} from {context / 'Dockerfile'} in {time.monotonic() - started:.1f}s")
    else:
        _say(f"{name} is up to date with {context} ({time.monotonic() - started:.1f}s)")


def load_one(builder: ImageBuilder, node: LocalNode, image: str) -> None:
    started = time.monotonic()
    path = Path(image)
    if path.is_file():
        names = node.import_archive(path)
        _say(f"loaded {', '.join(names)} from {path} in {time.monotonic() - started:.1f}s")
        return
    base = builder.base(image)
    if base is not None:
        node.load([base], progress=_say)
        _say(f"loaded {image} into node {NODE_NAME} in {time.monotonic() - started:.1f}s")
        return
    if not builder.has(image):
        stored = builder.stored()
        raise LoadError(
            f"image {image} is not a file nor in ansible-operator's image store "
            f"({builder.root}); the store has: {', '.join(stored) or 'nothing'}. "
            f"Build it there with 'ansible-operator cluster load --build DIR {image}'"
        )
    exported = builder.export(image, docker_reference(image))
    try:
        exporting = time.monotonic() - started
        sent = node.import_exported(exported)
    finally:
        exported.discard()
    total = time.monotonic() - started
    what = f"{sent / 1e6:.1f} MB of new layers" if sent else "nothing new"
    _say(
        f"loaded {exported.name} into node {NODE_NAME} in {total:.1f}s "
        f"(export {exporting:.1f}s, import {total - exporting:.1f}s: {what})"
    )
