"""A real node for the local control plane: containerd and kubelet on this
machine, joined to a `LocalControlPlane` started with `node=True`.

Pods run for real (runc, the bridge CNI plugin), from images built here
(`cluster/images.py`) and imported into containerd: nothing is pulled. They
reach the API server through the `kubernetes` Service with their mounted
ServiceAccount token (`cluster/host.py` maps that one Service).

One node per machine. `/run/ansible-operator-node/node.json` says whose it is
and what the host looked like before it, so `stop()` (or the next start, after
a crash) undoes everything: processes, mounts, cgroups, the address, the
bridge, the iptables rules.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client, config

from ansible_operator.cluster import host
from ansible_operator.cluster.build import cache_root
from ansible_operator.cluster.images import ExportedImage, Image, ImageBuilder, docker_reference
from ansible_operator.cluster.local import (
    KUBELET_CLIENT_USER,
    ControlPlaneError,
    LocalControlPlane,
    pid_alive,
    spawn,
    stop_process,
)
from ansible_operator.kube.kubeconfig import build_kubeconfig, write_kubeconfig
from ansible_operator.serving import pki

NODE_NAME = "local-node"
KUBELET_PORT = 10350  # not 10250: a kubelet of the machine's own may hold it
KUBELET_HEALTHZ_PORT = 10358
NAMESPACE = "k8s.io"  # containerd's namespace for the CRI

RECORD = host.RUN_DIR / "node.json"
LOCK = host.RUN_DIR.with_name("ansible-operator-node.lock")
CONTAINERD_SOCKET = host.RUN_DIR / "containerd.sock"
CONTAINERD_STATE = host.RUN_DIR / "containerd"
CNI_DIR = host.RUN_DIR / "cni"
# Not under the state dir: kubelet makes unix sockets in it, whose paths may
# not exceed 107 bytes.
KUBELET_ROOT = host.RUN_DIR / "kubelet"
NODE_PROCESSES = ("containerd", "kubelet")
# kubelet, containerd and runc call iptables, mount and runc by name.
SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class NodeError(ControlPlaneError):
    """The node could not start or stop; the message says why and where to look."""


def containerd_root() -> Path:
    """containerd's content and snapshots: kept across nodes, so images imported
    once need no import at the next start."""
    return cache_root() / "node" / "containerd"


@dataclass
class NodeRecord:
    """/run/ansible-operator-node/node.json: whose node runs, and what to undo."""

    state_dir: str
    kubelet_root: str
    before: dict[str, object]
    pids: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls) -> NodeRecord | None:
        if not RECORD.exists():
            return None
        return cls(**json.loads(RECORD.read_text()))

    def save(self) -> None:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(self.__dict__, indent=2) + "\n")

    def alive(self) -> dict[str, bool]:
        return {name: pid_alive(pid) for name, pid in self.pids.items()}


def node_unavailable_reason() -> str | None:
    """Why no node can start here now, or None."""
    reason = host.node_unavailable_reason()
    if reason:
        return reason
    record = NodeRecord.load()
    if record is None and host.pod_cgroup_roots():
        return (
            "another kubelet runs on this machine (its kubepods cgroups exist): "
            "a second one would share them"
        )
    if record and any(record.alive().values()):
        return (
            f"a node already runs on this machine for the control plane in {record.state_dir} "
            f"(one node per machine; 'ansible-operator cluster down --state-dir "
            f"{record.state_dir}' stops it)"
        )
    return None


def running_node() -> LocalNode:
    """The node running on this machine (there is at most one), whichever
    control plane it belongs to."""
    record = NodeRecord.load()
    if record is None or not any(record.alive().values()):
        raise NodeError(
            "no node runs on this machine to load images into: start one with "
            "'sudo ansible-operator cluster up --node'"
        )
    if os.geteuid() != 0:
        raise NodeError(
            f"the node's containerd ({CONTAINERD_SOCKET}) is root's: run this with sudo"
        )
    return LocalNode(LocalControlPlane(Path(record.state_dir), None))


class LocalNode:
    def __init__(self, plane: LocalControlPlane, images: ImageBuilder | None = None) -> None:
        self.plane = plane
        self.images = images or ImageBuilder()
        self.directory = plane.state_dir / "node"
        self.kubelet_root = KUBELET_ROOT
        self.log_dir = plane.log_dir
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    # ----- start -------------------------------------------------------------
    def start(
        self,
        *,
        images: Sequence[Image] = (),
        detached: bool = False,
        timeout: float = 120.0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        """Start containerd and kubelet, import `images`, wait until the node is Ready."""
        say = progress or (lambda _message: None)
        if not self.plane.node or self.plane.state is None:
            raise NodeError("the control plane was not started with node=True")
        with machine_lock():
            reason = node_unavailable_reason()
            if reason:
                raise NodeError(reason)
            leftover = NodeRecord.load()
            if leftover is not None:
                say(f"cleaning up after the node of {leftover.state_dir}, which did not stop")
                self._undo(leftover)
            host.ensure_packages({**host.NODE_PACKAGES, **host.IMAGE_PACKAGES}, say)
            pause = self.images.pause()
            # Recorded before the first change, so a crash half-way can be undone.
            record = NodeRecord(str(self.plane.state_dir), str(self.kubelet_root), {})
            record.before = host.snapshot().to_dict()
            record.save()
            try:
                host.setup_network(self.plane.state.apiserver_port)
                say("starting containerd")
                self._start("containerd", self._containerd_argv(pause), detached, record)
                self._wait_for_containerd(timeout)
                self.load([pause, *images], progress=say)
                self._let_api_server_call_kubelets()
                say(f"starting kubelet (node {NODE_NAME})")
                self._start("kubelet", self._kubelet_argv(), detached, record)
            except BaseException:
                self._undo(record)
                raise
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, argv: list[str], detached: bool, record: NodeRecord) -> None:
        env = {**os.environ, "PATH": SBIN_PATH + ":" + os.environ.get("PATH", "")}
        process = spawn(argv, self.log_dir / f"{name}.log", detached=detached, env=env)
        self._processes[name] = process
        record.pids[name] = process.pid
        record.save()

    def _check_alive(self, name: str) -> None:
        process = self._processes.get(name)
        if process is not None and process.poll() is not None:
            log = self.log_dir / f"{name}.log"
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
            raise NodeError(f"{name} exited with code {process.returncode}; log: {log}\n{tail}")

    # ----- containerd --------------------------------------------------------
    def _containerd_argv(self, pause: Image) -> list[str]:
        CNI_DIR.joinpath("net.d").mkdir(parents=True, exist_ok=True)
        CNI_DIR.joinpath("net.d", "10-local-node.conflist").write_text(
            json.dumps(cni_config(CNI_DIR / "ipam"), indent=2) + "\n"
        )
        containerd_root().mkdir(parents=True, exist_ok=True)
        path = self.directory / "containerd.toml"
        self.directory.mkdir(parents=True, exist_ok=True)
        path.write_text(containerd_config(pause.name))
        return ["containerd", "--config", str(path)]

    def _ctr_argv(self, *args: str) -> list[str]:
        return ["ctr", "--address", str(CONTAINERD_SOCKET), "--namespace", NAMESPACE, *args]

    def ctr(self, *args: str, check: bool = True) -> str:
        argv = self._ctr_argv(*args)
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if check and result.returncode != 0:
            raise NodeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
        return result.stdout

    def _wait_for_containerd(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while subprocess.run(
            ["ctr", "--address", str(CONTAINERD_SOCKET), "version"], capture_output=True
        ).returncode:
            self._check_alive("containerd")
            if time.monotonic() > deadline:
                raise NodeError(f"containerd not answering after {timeout:.0f}s")
            time.sleep(0.05)

    def load(self, images: Iterable[Image], progress: Callable[[str], None] | None = None) -> None:
        """Import images into the node's containerd, those not already there."""
        say = progress or (lambda _message: None)
        present = self.image_digests()
        for image in images:
            digest = archive_digest(image.archive)
            if present.get(image.name) == digest:
                continue
            say(f"importing image {image.name} into the node")
            repository = image.name.rsplit(":", 1)[0]
            # OCI archives name their image by ref.name; --base-name is the
            # repository ctr accepts such names under.
            self.ctr("images", "import", "--base-name", repository, str(image.archive))
            if self.image_digests().get(image.name) != digest:
                raise NodeError(f"importing {image.archive} did not give the image {image.name}")

    def import_exported(self, image: ExportedImage) -> int:
        """Import `image`, sending containerd only the blobs it lacks (after a
        role edit: the new layers). Returns the bytes sent; 0 when it was there."""
        present = self.image_digests()
        if present.get(image.name) == image.digest:
            return 0
        # The image this name held until now keeps the layers both share (and
        # their unpacked snapshots) from containerd's garbage collector until
        # the new one is unpacked on top of them.
        keep = f"{image.name}-replaced"
        kept = image.name in present
        if kept:
            self.ctr("images", "tag", "--force", image.name, keep)
        try:
            have = set(self.ctr("content", "list", "--quiet").split())
            missing = [blob for blob in image.blobs() if blob["digest"] not in have]
            self._import_stream(image, missing)
        finally:
            if kept:
                self.ctr("images", "remove", keep, check=False)
        if self.image_digests().get(image.name) != image.digest:
            raise NodeError(f"importing {image.directory} did not give the image {image.name}")
        return sum(int(str(blob["size"])) for blob in missing)

    def _import_stream(self, image: ExportedImage, blobs: list[dict[str, object]]) -> None:
        """`ctr images import` of an OCI layout holding `blobs`, written
        straight to its stdin: no archive on disk."""
        manifest = image.manifest
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": json.loads(manifest)["mediaType"],
                    "digest": image.digest,
                    "size": len(manifest),
                    "annotations": {"org.opencontainers.image.ref.name": image.name},
                }
            ],
        }
        argv = self._ctr_argv("images", "import", "--base-name", _repository(image.name), "-")
        with subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        ) as process:
            assert process.stdin is not None
            try:
                with tarfile.open(fileobj=process.stdin, mode="w|") as tar:
                    _add_bytes(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
                    _add_bytes(tar, "index.json", json.dumps(index).encode())
                    _add_bytes(tar, _blob_name(image.digest), manifest)
                    for blob in blobs:
                        digest = str(blob["digest"])
                        tar.add(image.blob_path(digest), arcname=_blob_name(digest))
            except BrokenPipeError:
                pass  # ctr stopped reading: its error follows
            finally:
                process.stdin.close()
            error = process.stderr.read().decode() if process.stderr else ""
        if process.returncode != 0:
            raise NodeError(f"{' '.join(argv)} failed: {error.strip()}")

    def import_archive(self, archive: Path) -> list[str]:
        """Import an OCI or docker archive file; returns the image names it gave."""
        names = archive_names(archive)
        if not names:
            raise NodeError(
                f"{archive}: the archive names no image (an OCI archive needs an "
                "'org.opencontainers.image.ref.name' with repository and tag, a docker "
                "archive RepoTags): save it again with its full name"
            )
        for repository in sorted({_repository(name) for name in names}):
            self.ctr("images", "import", "--base-name", repository, str(archive))
        present = self.image_digests()
        lost = [name for name in names if name not in present]
        if lost:
            raise NodeError(f"importing {archive} did not give the images {', '.join(lost)}")
        return names

    def image_digests(self) -> dict[str, str]:
        """Image name -> manifest digest, as the node's containerd has them."""
        lines = self.ctr("images", "list").splitlines()[1:]
        return {line.split()[0]: line.split()[2] for line in lines if line.strip()}

    # ----- kubelet -----------------------------------------------------------
    def _let_api_server_call_kubelets(self) -> None:
        """The API server calls kubelets (logs, exec) as KUBELET_CLIENT_USER, and
        kubelets ask the API server whether it may: it may do anything there."""
        body = client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name="ansible-operator:kubelet-api-admin"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io",
                kind="ClusterRole",
                name="system:kubelet-api-admin",
            ),
            subjects=[
                client.RbacV1Subject(
                    api_group="rbac.authorization.k8s.io", kind="User", name=KUBELET_CLIENT_USER
                )
            ],
        )
        with self._api() as api:
            try:
                client.RbacAuthorizationV1Api(api).create_cluster_role_binding(body)
            except client.ApiException as error:
                if error.status != 409:
                    raise

    def _kubelet_argv(self) -> list[str]:
        assert self.plane.state is not None
        pki_dir = self.directory / "pki"
        pki_dir.mkdir(parents=True, exist_ok=True)
        credentials = pki.issue_client_cert(
            self.plane.ca, pki_dir, f"system:node:{NODE_NAME}", ("system:nodes",)
        )
        kubeconfig = write_kubeconfig(
            self.directory / "kubelet.kubeconfig",
            build_kubeconfig(
                self.plane.state.server,
                name=NODE_NAME,
                ca_pem=self.plane.ca.cert_pem(),
                client_cert_pem=credentials.cert_pem(),
                client_key_pem=credentials.key_pem(),
            ),
        )
        config_path = self.directory / "kubelet.yaml"
        config_path.write_text(
            yaml.safe_dump(kubelet_config(self.kubelet_root, self.plane.ca.cert_path))
        )
        kubelet = self.plane.binaries.kubelet
        if kubelet is None:
            raise NodeError("no kubelet binary (envtest binaries have none)")
        return [
            *kubelet,
            f"--config={config_path}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={self.kubelet_root}",
            f"--cert-dir={self.directory / 'kubelet-pki'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={host.NODE_IP}",
            "--v=1",
        ]

    def ready(self) -> bool:
        """Ready, and the node-lifecycle controller has lifted the not-ready taint."""
        with self._api() as api:
            try:
                node = client.CoreV1Api(api).read_node(NODE_NAME)
            except client.ApiException:
                return False
        conditions = {c.type: c.status for c in node.status.conditions or []}
        return conditions.get("Ready") == "True" and not (node.spec.taints or [])

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            self._check_alive("containerd")
            self._check_alive("kubelet")
            if time.monotonic() > deadline:
                raise NodeError(
                    f"node {NODE_NAME} not Ready after {timeout:.0f}s; "
                    f"log: {self.log_dir / 'kubelet.log'}"
                )
            time.sleep(0.1)

    @contextlib.contextmanager
    def _api(self) -> Iterator[client.ApiClient]:
        with config.new_client_from_config(str(self.plane.kubeconfig)) as api:
            yield api

    # ----- stop --------------------------------------------------------------
    def running(self) -> dict[str, bool]:
        record = NodeRecord.load()
        if record is None or record.state_dir != str(self.plane.state_dir):
            return {}
        return record.alive()

    def stop(self) -> None:
        """Stop the node and undo every change to the host. Safe to call twice."""
        with machine_lock():
            record = NodeRecord.load()
            if record is None or record.state_dir != str(self.plane.state_dir):
                return
            self._undo(record)

    def _undo(self, record: NodeRecord) -> None:
        """Stop kubelet first (it would restart what goes next), then kill every
        container: the host sweep after it needs no CNI DEL, no graceful
        termination, and is the same whether the node stops or crashed."""
        kubelet = record.pids.get("kubelet")
        if kubelet:
            stop_process(kubelet, self._processes.pop("kubelet", None))
        containerd = record.pids.get("containerd")
        if containerd and pid_alive(containerd):
            self._remove_containers()
        if containerd:
            stop_process(containerd, self._processes.pop("containerd", None))
        record.pids.clear()
        record.save()
        before = host.HostBefore.from_dict(record.before)
        roots = [Path(record.kubelet_root), host.RUN_DIR, containerd_root()]
        host.teardown(before, roots, str(CONTAINERD_SOCKET))
        left = host.leftovers(before, roots)
        with contextlib.suppress(Exception):
            if self.plane.ready():
                with self._api() as api:
                    client.CoreV1Api(api).delete_node(NODE_NAME)
        for directory in (CONTAINERD_STATE, CNI_DIR, Path(record.kubelet_root)):
            subprocess.run(["rm", "-rf", "--one-file-system", str(directory)], check=False)
        for socket in host.RUN_DIR.glob("containerd.sock*"):
            socket.unlink()
        RECORD.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            host.RUN_DIR.rmdir()
        if left:
            raise NodeError(f"the node left behind: {'; '.join(left)}")

    def _remove_containers(self) -> None:
        """Containers left once kubelet is gone: killed and removed, so
        containerd keeps no snapshot of them for the next node."""
        for task in self.ctr("tasks", "list", "--quiet", check=False).split():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
        for _ in range(50):
            if not self.ctr("tasks", "list", "--quiet", check=False).split():
                break
            time.sleep(0.1)
        for task in self.ctr("tasks", "list", "--quiet", check=False).split():
            self.ctr("tasks", "delete", "--force", task, check=False)
        for container in self.ctr("containers", "list", "--quiet", check=False).split():
            self.ctr("containers", "delete", container, check=False)


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """Held while a node starts or stops: two at once would undo each other."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def archive_digest(archive: Path) -> str:
    """The manifest digest an OCI archive holds (what containerd will list)."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        assert member is not None
        return json.load(member)["manifests"][0]["digest"]


def archive_names(archive: Path) -> list[str]:
    """The image names an OCI or docker archive carries, as containerd names them."""
    try:
        with tarfile.open(archive) as tar:
            files = set(tar.getnames())
            if "index.json" in files:
                index = json.load(tar.extractfile("index.json") or io.BytesIO(b"{}"))
                annotations = [m.get("annotations") or {} for m in index.get("manifests", [])]
                names = [
                    a.get("io.containerd.image.name") or a.get("org.opencontainers.image.ref.name")
                    for a in annotations
                ]
                # A bare tag ("latest") names no repository: containerd could not place it.
                return [docker_reference(n) for n in names if n and ("/" in n or ":" in n)]
            if "manifest.json" in files:
                manifest = json.load(tar.extractfile("manifest.json") or io.BytesIO(b"[]"))
                return [docker_reference(t) for m in manifest for t in m.get("RepoTags") or []]
    except (tarfile.TarError, json.JSONDecodeError, OSError) as error:
        raise NodeError(f"{archive}: not an OCI or docker image archive ({error})") from None
    raise NodeError(
        f"{archive}: not an OCI or docker image archive (no index.json, no manifest.json)"
    )


def _repository(name: str) -> str:
    """`docker.io/library/demo:1` -> `docker.io/library/demo`: what ctr's
    --base-name wants."""
    repository = name.split("@", 1)[0]
    head, _, last = repository.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def _blob_name(digest: str) -> str:
    return "blobs/" + digest.replace(":", "/", 1)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def containerd_config(sandbox_image: str) -> str:
    root = containerd_root()
    return f"""\
version = 2
root = "{root}"
state = "{CONTAINERD_STATE}"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = "{CONTAINERD_SOCKET}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # Lowering oom_score_adj needs CAP_SYS_RESOURCE, which root may lack (in
  # some VMs it does): clamp kubelet's -998 to containerd's own score.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{CNI_DIR / "net.d"}"
"""


def cni_config(ipam_dir: Path) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "local-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": host.BRIDGE,
                "isGateway": True,
                "ipMasq": False,  # Pods never leave this machine (host.setup_network)
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": host.POD_CIDR, "gateway": host.POD_GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
            {"type": "loopback"},
        ],
    }


def kubelet_config(root: Path, client_ca: Path) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # Many machines still mount cgroup v1 hierarchies (this VM's only has hugetlb on v2).
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        "failSwapOn": False,
        "address": host.NODE_IP,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "podLogsDir": str(root / "pod-logs"),
        "volumePluginDir": str(root / "volume-plugins"),
        "resolvConf": "/etc/resolv.conf",
        "maxPods": 30,
        "podPidsLimit": 4096,
        "imageGCHighThresholdPercent": 95,
        "imageGCLowThresholdPercent": 90,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "2%",
            "imagefs.available": "2%",
        },
        "containerLogMaxSize": "5Mi",
        "containerLogMaxFiles": 2,
    }
