"""A real local control plane: etcd, kube-apiserver and kube-controller-manager
as three processes on free loopback ports, under one state directory.

With `node=True` it is the control plane of a cluster with a real node
(`cluster/node.py`): kube-scheduler runs too, kube-controller-manager runs the
controllers Pods need, and kube-apiserver can reach kubelets and admits
ServiceAccounts.

`feature_gates` (Kubernetes' `--feature-gates`, e.g. alpha ShardedListAndWatch)
go to every control-plane component and are recorded with the ports, so a
running plane's gates can be compared with the ones asked for.

Two lifetimes:
- attached (tests, the demo): the processes die with the Python process that
  started them, even on SIGKILL (PR_SET_PDEATHSIG), and `stop()` ends them;
- detached (`ansible-operator cluster up`): they outlive the CLI; `state.json`
  records their pids so `cluster status` and `cluster down` find them.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ansible_operator.kube.kubeconfig import build_kubeconfig, write_kubeconfig
from ansible_operator.serving import pki

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager")
NODE_COMPONENTS = (*COMPONENTS, "kube-scheduler")
ADMIN_USER = "admin"
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"  # how the API server calls kubelets
# What a cluster with a node needs besides the API-only plane's garbage collector
# and namespace controller. `node-lifecycle-controller` lifts the not-ready taint.
NODE_CONTROLLERS = (
    "garbagecollector",
    "namespace",
    "deployment",
    "replicaset",
    "statefulset",
    "job",
    "cronjob",
    "endpoint",
    "endpointslice",
    "endpointslicemirroring",
    "serviceaccount",
    "serviceaccount-token",
    "root-ca-cert-publisher",
    "clusterrole-aggregation",
    "node-lifecycle-controller",
    "podgc",
    "ttl-after-finished",
    "disruption",
    "resourcequota",
)
_PR_SET_PDEATHSIG = 1
# Who gets `--feature-gates`: the Kubernetes components (etcd has no gates), so
# a gate that spans the API server and its clients is on in both.
GATED_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
_GATE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
# What Go's strconv.ParseBool accepts, as component-base's MapStringBool parses it.
_GATE_VALUES = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


class ControlPlaneError(RuntimeError):
    """A component failed to start or become ready; the message names it and its log."""


def parse_feature_gates(text: str) -> dict[str, bool]:
    """`Name=bool` pairs, comma-separated, as Kubernetes' `--feature-gates` takes
    them; a ValueError names the pair that is not one. Checked here so a typo
    fails before any process starts, not as a kube-apiserver log line."""
    gates: dict[str, bool] = {}
    for pair in (part.strip() for part in text.split(",")):
        if not pair:
            continue
        name, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not _GATE_NAME.fullmatch(name) or value not in _GATE_VALUES:
            raise ValueError(
                f"feature gate {pair!r} is not Name=true or Name=false "
                "(comma-separated, e.g. ShardedListAndWatch=true)"
            )
        if name in gates:
            raise ValueError(f"feature gate {name!r} is given twice")
        gates[name] = _GATE_VALUES[value]
    return gates


def format_feature_gates(gates: Mapping[str, bool]) -> str:
    """The `--feature-gates` value: sorted, so the same gates make the same argv."""
    return ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))


@dataclass(frozen=True)
class Binaries:
    """How to start each component: an argv prefix, so one multi-call binary
    (`controlplane etcd ...`) and separate envtest binaries fit the same code."""

    etcd: list[str]
    apiserver: list[str]
    controller_manager: list[str] | None
    scheduler: list[str] | None = None
    kubelet: list[str] | None = None

    @classmethod
    def multicall(cls, binary: Path) -> Binaries:
        return cls(
            [str(binary), "etcd"],
            [str(binary), "kube-apiserver"],
            [str(binary), "kube-controller-manager"],
            [str(binary), "kube-scheduler"],
            [str(binary), "kubelet"],
        )

    @classmethod
    def envtest(cls, assets: Path) -> Binaries:
        manager = assets / "kube-controller-manager"
        return cls(
            [str(assets / "etcd")],
            [str(assets / "kube-apiserver")],
            [str(manager)] if manager.exists() else None,
        )

    def argv(self, component: str) -> list[str] | None:
        return {
            "etcd": self.etcd,
            "kube-apiserver": self.apiserver,
            "kube-controller-manager": self.controller_manager,
            "kube-scheduler": self.scheduler,
            "kubelet": self.kubelet,
        }[component]


@dataclass
class State:
    """What `state.json` records about a running control plane."""

    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    binaries: dict[str, list[str] | None]
    pids: dict[str, int] = field(default_factory=dict)
    node: bool = False
    # Absent from a state.json written before gates existed: none were set.
    feature_gates: dict[str, bool] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(
    argv: list[str], log_path: Path, *, detached: bool, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a process in its own session, output to `log_path`; unless detached,
    it dies with this Python process, even on SIGKILL."""
    log = log_path.open("ab")
    try:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=None if detached else _die_with_parent,
        )
    finally:
        log.close()


def stop_process(
    pid: int, process: subprocess.Popen[bytes] | None = None, timeout: float = 15.0
) -> None:
    """SIGTERM, then SIGKILL after `timeout`; reap it if it is our child."""
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=0.1)
            else:
                time.sleep(0.1)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if process is not None:
        process.wait()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still answers kill(0); it is not running.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


class LocalControlPlane:
    def __init__(
        self,
        state_dir: Path,
        binaries: Binaries | None = None,
        *,
        node: bool = False,
        feature_gates: Mapping[str, bool] | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.pki_dir = state_dir / "pki"
        self.log_dir = state_dir / "logs"
        self.state_file = state_dir / "state.json"
        self.kubeconfig = state_dir / "admin.kubeconfig"
        self._binaries = binaries
        self._node = node
        self._feature_gates = dict(feature_gates or {})
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self.state: State | None = self._load_state()

    # ----- state -------------------------------------------------------------
    def _load_state(self) -> State | None:
        if not self.state_file.exists():
            return None
        return State(**json.loads(self.state_file.read_text()))

    def _save_state(self) -> None:
        assert self.state is not None
        self.state_file.write_text(json.dumps(asdict(self.state), indent=2) + "\n")

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            assert self.state is not None, "no binaries given and no recorded state"
            recorded = self.state.binaries
            self._binaries = Binaries(
                recorded["etcd"] or [],
                recorded["kube-apiserver"] or [],
                recorded["kube-controller-manager"],
                recorded.get("kube-scheduler"),
                recorded.get("kubelet"),
            )
        return self._binaries

    @property
    def node(self) -> bool:
        """Whether this is (or will be) the control plane of a cluster with a node."""
        return self.state.node if self.state else self._node

    @property
    def feature_gates(self) -> dict[str, bool]:
        """The gates it runs (or will run) with: the recorded ones once started."""
        return dict(self.state.feature_gates if self.state else self._feature_gates)

    @property
    def components(self) -> tuple[str, ...]:
        return NODE_COMPONENTS if self.node else COMPONENTS

    @property
    def has_controller_manager(self) -> bool:
        return self.binaries.controller_manager is not None

    def running(self) -> dict[str, bool]:
        pids = self.state.pids if self.state else {}
        return {
            name: name in pids and pid_alive(pids[name])
            for name in self.components
            if self.binaries.argv(name) is not None
        }

    # ----- start -------------------------------------------------------------
    def start(
        self,
        *,
        detached: bool = False,
        timeout: float = 120.0,
        progress: Callable[[str], None] | None = None,
    ) -> Path:
        """Start all components, wait until the API server is ready, return the kubeconfig."""
        say = progress or (lambda _message: None)
        if self.state and any(self.running().values()):
            raise ControlPlaneError(
                f"a control plane is already running from {self.state_dir} "
                f"(pids {self.state.pids}); stop it first"
            )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o700)
        self.log_dir.mkdir(exist_ok=True)
        if self._node and (self.binaries.scheduler is None or self.binaries.kubelet is None):
            raise ControlPlaneError(
                "a node needs kube-scheduler and kubelet: the multi-call binary built from "
                "controlplane/ has them, envtest binaries (KUBEBUILDER_ASSETS) do not"
            )
        self._write_pki()
        self.state = State(
            etcd_port=free_port(),
            etcd_peer_port=free_port(),
            apiserver_port=free_port(),
            binaries={name: self.binaries.argv(name) for name in (*NODE_COMPONENTS, "kubelet")},
            node=self._node,
            feature_gates=self._feature_gates,
        )
        self._save_state()
        try:
            say("starting etcd")
            self.start_component("etcd", detached=detached)
            self._wait_for_etcd(timeout)
            say("starting kube-apiserver")
            self.start_component("kube-apiserver", detached=detached)
            self.wait_ready(timeout)
            self._write_admin_kubeconfig()
            if self.has_controller_manager:
                say(f"starting kube-controller-manager ({', '.join(self._controllers())})")
                self.start_component("kube-controller-manager", detached=detached)
            if self.node:
                say("starting kube-scheduler")
                self.start_component("kube-scheduler", detached=detached)
        except BaseException:
            self.stop()
            raise
        return self.kubeconfig

    def _write_pki(self) -> None:
        # A state directory made by an older version keeps its data and
        # service-account key; its certificates are made again when they lack
        # the key identifiers Python 3.13 verifies.
        fresh = not self.ca.cert_path.exists() or pki.lacks_key_identifier(self.ca.cert_path)
        if fresh:
            ca = pki.create_ca(self.pki_dir)
            pki.issue_serving_cert(ca, self.pki_dir)
            pki.issue_client_cert(ca, self.pki_dir, ADMIN_USER, ("system:masters",))
        if not (self.pki_dir / "sa.key").exists():
            pki.create_service_account_key(self.pki_dir)
        if self._node and (fresh or not self._kubelet_client.cert_path.exists()):
            pki.issue_client_cert(self.ca, self.pki_dir, KUBELET_CLIENT_USER)

    @property
    def _kubelet_client(self) -> pki.KeyPair:
        stem = self.pki_dir / f"client-{KUBELET_CLIENT_USER}"
        return pki.KeyPair(stem.with_suffix(".crt"), stem.with_suffix(".key"))

    def _controllers(self) -> tuple[str, ...]:
        return NODE_CONTROLLERS if self.node else ("garbagecollector", "namespace")

    @property
    def ca(self) -> pki.KeyPair:
        return pki.KeyPair(self.pki_dir / "ca.crt", self.pki_dir / "ca.key")

    def _args(self, component: str) -> list[str]:
        args = self._component_args(component)
        if component in GATED_COMPONENTS and self.feature_gates:
            args.append(f"--feature-gates={format_feature_gates(self.feature_gates)}")
        return args

    def _component_args(self, component: str) -> list[str]:
        assert self.state is not None
        s, d, p = self.state, self.state_dir, self.pki_dir
        if component == "etcd":
            return [
                "--name=local",
                f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{s.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{s.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{s.etcd_peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{s.etcd_peer_port}",
                f"--initial-cluster=local=http://127.0.0.1:{s.etcd_peer_port}",
                "--unsafe-no-fsync",
                "--log-level=error",
            ]
        if component == "kube-apiserver":
            api_only = [
                f"--etcd-servers=http://127.0.0.1:{s.etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={s.apiserver_port}",
                f"--cert-dir={p}",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                f"--service-account-issuer=https://127.0.0.1:{s.apiserver_port}",
                f"--service-account-key-file={p / 'sa.key'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/16",  # room for 500-object soaks
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                "--disable-admission-plugins=ServiceAccount",
                "--profiling=false",
                "--v=0",
            ]
            return self._for_kubelets(api_only) if self.node else api_only
        if component == "kube-controller-manager":
            args = [
                f"--kubeconfig={self.kubeconfig}",
                f"--controllers={','.join(self._controllers())}",
                "--leader-elect=false",
                "--secure-port=0",
                "--concurrent-gc-syncs=5",
                "--v=0",
            ]
            if self.node:
                # Token Secrets and the kube-root-ca.crt ConfigMap Pods mount.
                args += [
                    f"--root-ca-file={p / 'ca.crt'}",
                    f"--service-account-private-key-file={p / 'sa.key'}",
                ]
            return args
        if component == "kube-scheduler":
            return [
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=0",
            ]
        raise ValueError(component)

    def _for_kubelets(self, api_only: list[str]) -> list[str]:
        """The API-only flags changed for a cluster with a node: the Node
        authorizer and NodeRestriction (as kubeadm sets them), ServiceAccount
        admission (Pods get their token volume), and the way to kubelets: by the
        InternalIP they report (their names resolve nowhere), with a client
        certificate they trust."""
        swapped = {
            "--authorization-mode=RBAC": "--authorization-mode=Node,RBAC",
            "--disable-admission-plugins=ServiceAccount": (
                "--enable-admission-plugins=NodeRestriction"
            ),
        }
        return [
            *(swapped.get(arg, arg) for arg in api_only),
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={self._kubelet_client.cert_path}",
            f"--kubelet-client-key={self._kubelet_client.key_path}",
        ]

    def start_component(self, component: str, *, detached: bool = False) -> None:
        """Start one component (also used by fault tests to restart the API server)."""
        assert self.state is not None
        argv = self.binaries.argv(component)
        if argv is None:
            raise ControlPlaneError(f"no binary for {component}")
        process = spawn(
            [*argv, *self._args(component)], self.log_dir / f"{component}.log", detached=detached
        )
        self._processes[component] = process
        self.state.pids[component] = process.pid
        self._save_state()

    def _check_alive(self, component: str) -> None:
        process = self._processes.get(component)
        if process is not None and process.poll() is not None:
            log = self.log_dir / f"{component}.log"
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
            raise ControlPlaneError(
                f"{component} exited with code {process.returncode} while starting; "
                f"log: {log}\n{tail}"
            )

    def _wait_for_etcd(self, timeout: float) -> None:
        assert self.state is not None
        url = f"http://127.0.0.1:{self.state.etcd_port}/health"
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive("etcd")
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
                if json.loads(response.read()).get("health") == "true":
                    return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"etcd not healthy after {timeout:.0f}s; log: {self.log_dir / 'etcd.log'}"
                )
            time.sleep(0.1)

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        admin = self.pki_dir / f"client-{ADMIN_USER}"
        context.load_cert_chain(f"{admin}.crt", f"{admin}.key")
        return context

    def ready(self) -> bool:
        if self.state is None:
            return False
        try:
            with urllib.request.urlopen(
                f"{self.state.server}/readyz", context=self.ssl_context(), timeout=2
            ) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            self._check_alive("etcd")
            self._check_alive("kube-apiserver")
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"kube-apiserver not ready after {timeout:.0f}s; "
                    f"log: {self.log_dir / 'kube-apiserver.log'}"
                )
            time.sleep(0.2)

    # ----- users -------------------------------------------------------------
    def _write_admin_kubeconfig(self) -> None:
        assert self.state is not None
        admin = pki.KeyPair(
            self.pki_dir / f"client-{ADMIN_USER}.crt", self.pki_dir / f"client-{ADMIN_USER}.key"
        )
        write_kubeconfig(
            self.kubeconfig,
            build_kubeconfig(
                self.state.server,
                name="ansible-operator-local",
                ca_pem=self.ca.cert_pem(),
                client_cert_pem=admin.cert_pem(),
                client_key_pem=admin.key_pem(),
            ),
        )

    def user_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig for another user (e.g. a restricted one for RBAC tests)."""
        assert self.state is not None
        pair = pki.issue_client_cert(self.ca, self.pki_dir, user, groups)
        path = self.state_dir / f"{pair.cert_path.stem}.kubeconfig"
        return write_kubeconfig(
            path,
            build_kubeconfig(
                self.state.server,
                name="ansible-operator-local",
                ca_pem=self.ca.cert_pem(),
                client_cert_pem=pair.cert_pem(),
                client_key_pem=pair.key_pem(),
            ),
        )

    # ----- stop --------------------------------------------------------------
    def stop_component(self, component: str, timeout: float = 15.0) -> None:
        if self.state is None or component not in self.state.pids:
            return
        pid = self.state.pids.pop(component)
        stop_process(pid, self._processes.pop(component, None), timeout)
        self._save_state()

    def stop(self) -> None:
        """Stop every component, in reverse start order. Safe to call twice."""
        for component in reversed(self.components):
            self.stop_component(component)
