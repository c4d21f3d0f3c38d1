"""The host side of a local node: the Debian packages it runs on, and the
changes it makes to this machine, each one undone by `teardown`.

A node needs root: kubelet and containerd create cgroups, mounts, network
namespaces and iptables rules. There is one node per machine: the bridge, the
node address and the rules below have fixed names.

What `teardown` undoes, and why each exists:
- an address on `lo` for the node: kubelet refuses a loopback node IP, and this
  machine may have no other interface of its own to give it;
- the Pods' bridge, made before kubelet starts so `route_localnet` can be set
  on it: Pods reach the API server (on 127.0.0.1) through a DNAT rule, the one
  job of kube-proxy this node needs (the `kubernetes` Service);
- guard rules: Pods never reach another 127.0.0.1 port (etcd listens there
  without authentication) nor anything beyond this machine;
- what kubelet, containerd and the CNI plugins leave whatever they are told:
  their iptables chains, cgroups, mounts, `/run/containerd`, `/var/lib/cni`...
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

RUN_DIR = Path("/run/ansible-operator-node")

NODE_IP = "10.89.0.1"
BRIDGE = "aonode0"
POD_CIDR = "10.88.7.0/24"
POD_GATEWAY = "10.88.7.1"
SERVICE_IP = "10.0.0.1"  # the `kubernetes` Service: first address of the service range
RULE_COMMENT = "ansible-operator-node"

# Each thing the node runs, and the Debian package that brings it.
NODE_PACKAGES = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "iptables": "iptables",
    "nft": "nftables",  # only to drop the empty tables iptables-nft leaves behind
}
IMAGE_PACKAGES = {
    "debootstrap": "debootstrap",
    "buildah": "buildah",
    "catatonit": "catatonit",  # the Pods' pause process
}

# Paths kubelet, containerd 1.6 and libcni write whatever their configuration says.
FIXED_PATHS = (
    "/run/containerd",
    "/var/lib/cni",
    "/var/log/containers",
    "/var/log/pods",
    "/usr/libexec/kubernetes",
    "/var/lib/kubelet",
)
# Chains kubelet and the CNI plugins create; removed only if they were not there before.
OWN_CHAIN = re.compile(r"^(CNI-|KUBE-)")
IPTABLES = ("iptables", "ip6tables")
TABLES = ("filter", "nat", "mangle")


class HostError(RuntimeError):
    """The host cannot run a node, or a host command failed; the message says which."""


def node_unavailable_reason() -> str | None:
    """Why this machine cannot run a node, or None when it can."""
    if not Path("/proc/self/mountinfo").exists():
        return "a node needs Linux (kubelet and containerd)"
    if os.geteuid() != 0:
        return (
            "a node needs root: kubelet and containerd create cgroups, mounts, network "
            "namespaces and iptables rules (run as root, or use the API-only control plane)"
        )
    missing = missing_packages({**NODE_PACKAGES, **IMAGE_PACKAGES})
    if missing and shutil.which("apt-get") is None:
        return f"a node needs the packages {', '.join(missing)} and there is no apt-get here"
    return None


def _present(thing: str) -> bool:
    return Path(thing).exists() if thing.startswith("/") else shutil.which(thing) is not None


def missing_packages(packages: dict[str, str]) -> list[str]:
    return sorted({package for thing, package in packages.items() if not _present(thing)})


def ensure_packages(packages: dict[str, str], say: Callable[[str], None]) -> None:
    """Install the Debian packages that are missing (root only)."""
    missing = missing_packages(packages)
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise HostError(f"missing packages {', '.join(missing)}: install them as root with apt-get")
    say(f"installing {', '.join(missing)} from Debian's packages")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Another apt-get (a build of images meanwhile) holds dpkg's lock: wait for it.
    install = [
        "apt-get",
        "-o",
        "DPkg::Lock::Timeout=900",
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        *missing,
    ]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode != 0:
        # An old or empty package list is the usual cause: refresh it once.
        _run(["apt-get", "update", "-q"], env=env)
        _run(install, env=env)


def _run(argv: list[str], *, env: dict[str, str] | None = None, check: bool = True) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if check and result.returncode != 0:
        raise HostError(f"{shlex.join(argv)} failed (exit {result.returncode}): {result.stderr}")
    return result.stdout


# ----- what was there before --------------------------------------------------
@dataclass
class HostBefore:
    """The host as it was before the node: `teardown` restores exactly this."""

    ip_forward: str = "0"
    nft_tables: list[str] = field(default_factory=list)
    chains: dict[str, list[str]] = field(default_factory=dict)  # "iptables nat" -> chains
    paths: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> HostBefore:
        return cls(**data)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def snapshot() -> HostBefore:
    return HostBefore(
        ip_forward=Path("/proc/sys/net/ipv4/ip_forward").read_text().strip(),
        nft_tables=nft_tables(),
        chains={f"{tool} {table}": chains(tool, table) for tool in IPTABLES for table in TABLES},
        paths=[path for path in FIXED_PATHS if Path(path).exists()],
    )


def nft_tables() -> list[str]:
    if shutil.which("nft") is None:
        return []
    out = _run(["nft", "list", "tables"], check=False)
    return sorted(line.removeprefix("table ").strip() for line in out.splitlines() if line)


def chains(tool: str, table: str) -> list[str]:
    out = _run([tool, "-w", "-t", table, "-S"], check=False)
    return [line.split()[1] for line in out.splitlines() if line.startswith("-N ")]


# ----- setup -----------------------------------------------------------------
def setup_network(apiserver_port: int) -> None:
    """The node address, the Pods' bridge and the rules that let Pods reach the
    API server and nothing else off the bridge."""
    if f" {NODE_IP}/32 " not in _run(["ip", "-o", "addr", "show", "dev", "lo"]):
        _run(["ip", "addr", "add", f"{NODE_IP}/32", "dev", "lo"])
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
        _run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    _run(["ip", "link", "set", BRIDGE, "up"])
    # Pods' packets to 10.0.0.1:443 are rewritten to 127.0.0.1: the kernel routes
    # them locally only with route_localnet on the interface they arrive on.
    Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/route_localnet").write_text("1")
    comment = ["-m", "comment", "--comment", RULE_COMMENT]
    rules = [
        # The `kubernetes` Service, as kube-proxy would map it.
        ("nat", "PREROUTING", ["-s", POD_CIDR, "-d", f"{SERVICE_IP}/32", "-p", "tcp",
                               "--dport", "443", *comment, "-j", "DNAT",
                               "--to-destination", f"127.0.0.1:{apiserver_port}"]),
        # Any other loopback port (etcd, the test servers) stays out of reach.
        ("filter", "INPUT", ["-i", BRIDGE, "-d", "127.0.0.0/8", "-m", "conntrack", "!",
                             "--ctstate", "DNAT", *comment, "-j", "DROP"]),
        # Pods talk to each other and to this machine, never beyond it.
        ("filter", "FORWARD", ["-i", BRIDGE, "!", "-o", BRIDGE, *comment, "-j", "DROP"]),
        ("filter", "FORWARD", ["-o", BRIDGE, "!", "-i", BRIDGE, *comment, "-j", "DROP"]),
    ]  # fmt: skip
    for table, chain, spec in rules:
        if subprocess.run(["iptables", "-w", "-t", table, "-C", chain, *spec],
                          capture_output=True).returncode != 0:  # fmt: skip
            _run(["iptables", "-w", "-t", table, "-I", chain, "1", *spec])


# ----- teardown --------------------------------------------------------------
def teardown(before: HostBefore, mount_roots: Iterable[Path], shim_address: str) -> None:
    """Undo everything the node did to the host. Safe to run twice, and after a crash."""
    kill_pod_processes(shim_address)
    # Only under our own directories: /run/containerd or /run/netns may hold
    # the mounts of another containerd (Docker's) or of `ip netns`.
    unmount_under(mount_roots)
    remove_pod_cgroups()
    _remove_network(before)
    for path in FIXED_PATHS:
        if path not in before.paths:
            shutil.rmtree(path, ignore_errors=True)
    Path("/proc/sys/net/ipv4/ip_forward").write_text(before.ip_forward)


def kill_pod_processes(shim_address: str) -> None:
    """SIGKILL every container process (anything in a kubepods cgroup) and every
    containerd shim of our containerd: they outlive containerd by design."""
    for _ in range(20):
        pids = set(_pod_cgroup_pids()) | set(_shim_pids(shim_address))
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def pod_cgroup_roots() -> list[Path]:
    roots = [Path("/sys/fs/cgroup/kubepods"), *Path("/sys/fs/cgroup").glob("*/kubepods")]
    return [root for root in roots if root.is_dir()]


def _pod_cgroup_pids() -> Iterable[int]:
    for root in pod_cgroup_roots():
        for procs in root.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                yield from (int(line) for line in procs.read_text().split())


def _shim_pids(shim_address: str) -> Iterable[int]:
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if argv[0].endswith(b"containerd-shim-runc-v2") and shim_address.encode() in argv:
                yield int(proc.name)


def mounts() -> list[str]:
    """Mount points, as the kernel lists them (octal escapes decoded)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), point))
    return points


def unmount_under(roots: Iterable[Path]) -> None:
    prefixes = [str(root).rstrip("/") for root in roots]
    inside = [
        point
        for point in mounts()
        if any(point == prefix or point.startswith(prefix + "/") for prefix in prefixes)
    ]
    for point in sorted(set(inside), key=lambda p: p.count("/"), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def remove_pod_cgroups() -> None:
    for root in pod_cgroup_roots():
        for directory in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if directory.is_dir():
                with contextlib.suppress(OSError):
                    directory.rmdir()
        with contextlib.suppress(OSError):
            root.rmdir()


def _remove_network(before: HostBefore) -> None:
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False)
    # veths left by a CNI DEL that never ran go with their Pods' namespaces;
    # the bridge's went with it.
    subprocess.run(["ip", "addr", "del", f"{NODE_IP}/32", "dev", "lo"], capture_output=True)
    for tool in IPTABLES:
        for table in TABLES:
            _remove_rules_and_chains(tool, table, set(before.chains.get(f"{tool} {table}", [])))
    for table in nft_tables():
        if table not in before.nft_tables and _nft_table_empty(table):
            _run(["nft", "delete", "table", *table.split()], check=False)


def _remove_rules_and_chains(tool: str, table: str, kept: set[str]) -> None:
    ours = {chain for chain in chains(tool, table) if OWN_CHAIN.match(chain) and chain not in kept}
    for line in _run([tool, "-w", "-t", table, "-S"], check=False).splitlines():
        if not line.startswith("-A "):
            continue
        words = shlex.split(line)
        jumps_to_ours = any(
            flag in ("-j", "-g") and target in ours for flag, target in itertools.pairwise(words)
        )
        if RULE_COMMENT in words or (words[1] not in ours and jumps_to_ours):
            _run([tool, "-w", "-t", table, "-D", *words[1:]], check=False)
    for flag in ("-F", "-X"):
        for chain in ours:
            _run([tool, "-w", "-t", table, flag, chain], check=False)


def _nft_table_empty(table: str) -> bool:
    listing = _run(["nft", "list", "table", *table.split()], check=False)
    skeleton = re.compile(r"^\s*(table |chain |type |policy |\}|$)")
    return all(skeleton.match(line) for line in listing.splitlines())


# ----- what is left ----------------------------------------------------------
def leftovers(before: HostBefore, mount_roots: Iterable[Path]) -> list[str]:
    """What of the node is still on the host (empty after a clean teardown)."""
    found = []
    prefixes = [str(root).rstrip("/") for root in mount_roots]
    found += [
        f"mount {point}"
        for point in mounts()
        if any(point == prefix or point.startswith(prefix + "/") for prefix in prefixes)
    ]
    found += [f"cgroup {root}" for root in pod_cgroup_roots()]
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
        found.append(f"bridge {BRIDGE}")
    if f" {NODE_IP}/32 " in _run(["ip", "-o", "addr", "show", "dev", "lo"], check=False):
        found.append(f"address {NODE_IP} on lo")
    for tool in IPTABLES:
        for table in TABLES:
            kept = set(before.chains.get(f"{tool} {table}", []))
            found += [
                f"{tool} -t {table} chain {chain}"
                for chain in chains(tool, table)
                if OWN_CHAIN.match(chain) and chain not in kept
            ]
            rules = _run([tool, "-w", "-t", table, "-S"], check=False)
            found += [
                f"{tool} -t {table} rule {r}" for r in rules.splitlines() if RULE_COMMENT in r
            ]
    found += [f"nft table {t}" for t in nft_tables() if t not in before.nft_tables]
    return found
