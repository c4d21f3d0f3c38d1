"""A real OpenTelemetry Collector for tests and benchmarks: tools/otel-collector
(the collector's own otelcol and OTLP receiver, built from Go modules by
go_tools.built), receiving OTLP/HTTP on a loopback port and writing every batch
it received, decoded, as a line of OTLP JSON (`received`, `spans`).

    with Collector(built("otel-collector"), tmp_path).start() as collector:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        ...
        spans = collector.wait_for(lambda spans: ..., what="the reconcile's spans")
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from ansible_operator.cluster.local import free_port
from ansible_operator.testing.waiting import eventually

CONFIG = """\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
exporters:
  jsonfile:
    path: {path}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jsonfile]
"""
STARTS = 3  # tries, each on a fresh free port (another process may take one meanwhile)
STATUS_ERROR = 2  # OTLP's STATUS_CODE_ERROR


@dataclass(frozen=True)
class ReceivedSpan:
    """A span as the collector received it."""

    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root
    name: str
    kind: int  # OTLP's: 1 internal, 2 server
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    resource: dict[str, Any]

    @property
    def failed(self) -> bool:
        return self.status_code == STATUS_ERROR

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def _value(value: dict[str, Any]) -> Any:
    """An OTLP JSON AnyValue as Python (intValue is a string in OTLP JSON)."""
    if "intValue" in value:
        return int(value["intValue"])
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "arrayValue" in value:
        return [_value(item) for item in value["arrayValue"].get("values", [])]
    return None


def _attributes(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: _value(item.get("value") or {}) for item in items or []}


def parse_batches(text: str) -> list[ReceivedSpan]:
    spans = []
    for line in text.splitlines():
        if not line.strip():
            continue
        for resource_spans in json.loads(line).get("resourceSpans", []):
            resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
            for scope in resource_spans.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    status = span.get("status") or {}
                    spans.append(
                        ReceivedSpan(
                            trace_id=span["traceId"],
                            span_id=span["spanId"],
                            parent_span_id=span.get("parentSpanId", ""),
                            name=span["name"],
                            kind=int(span.get("kind", 0)),
                            start_ns=int(span["startTimeUnixNano"]),
                            end_ns=int(span["endTimeUnixNano"]),
                            attributes=_attributes(span.get("attributes")),
                            status_code=int(status.get("code", 0)),
                            status_message=status.get("message", ""),
                            resource=resource,
                        )
                    )
    return spans


class Collector:
    def __init__(self, binary: Path, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.output = directory / "received.jsonl"
        self.log_path = directory / "collector.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """For OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Self:
        self.directory.mkdir(parents=True, exist_ok=True)
        for _attempt in range(STARTS):
            self.port = free_port()
            config = self.directory / "config.yaml"
            config.write_text(CONFIG.format(port=self.port, path=self.output))
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    [str(self.binary), f"--config={config}"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            if self._wait_ready(timeout):
                return self
        raise AssertionError(f"the collector did not start; log:\n{self.logs[-4000:]}")

    def _wait_ready(self, timeout: float) -> bool:
        """Until its OTLP receiver accepts an (empty) export; False if it exited
        (the port was taken meanwhile)."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if self._accepts_export():
                return True
            time.sleep(0.1)
        raise AssertionError(f"the collector was not ready in {timeout}s:\n{self.logs[-4000:]}")

    def _accepts_export(self) -> bool:
        request = urllib.request.Request(
            f"{self.endpoint}/v1/traces",
            data=b"{}",
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    @property
    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def received(self) -> bytes:
        """Everything the collector received so far, as it wrote it."""
        try:
            return self.output.read_bytes()
        except FileNotFoundError:
            return b""

    def spans(self) -> list[ReceivedSpan]:
        # Whole lines only: the exporter writes one batch per write.
        text = self.received().decode()
        return parse_batches(text[: text.rfind("\n") + 1])

    def wait_for(
        self,
        check: Callable[[list[ReceivedSpan]], Any],
        *,
        what: str,
        timeout: float = 90.0,
    ) -> Any:
        """Until `check(spans received)` is truthy; its value."""
        return eventually(
            lambda: check(self.spans()),
            timeout=timeout,
            interval=0.2,
            what=what,
            describe=lambda: (
                "received: "
                + ", ".join(f"{span.name} {span.attributes}" for span in self.spans()[-30:])
            ),
        )

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def render(spans: list[ReceivedSpan], root: ReceivedSpan) -> str:
    """`root` and its descendants as a tree: name, duration, key attributes."""
    by_parent: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        if span.trace_id == root.trace_id:
            by_parent.setdefault(span.parent_span_id, []).append(span)
    shown = (
        "ansible.task.path",
        "k8s.request.verb",
        "http.response.status_code",
        "reconcile.result",
        "ansible.run.status",
    )
    lines: list[str] = []

    def walk(span: ReceivedSpan, depth: int) -> None:
        details = " ".join(
            f"{key.rsplit('.', 1)[-1]}={span.attributes[key]}"
            for key in shown
            if key in span.attributes
        )
        error = f" ERROR {span.status_message!r}" if span.failed else ""
        offset = (span.start_ns - root.start_ns) / 1e6
        lines.append(
            f"{'  ' * depth}{span.name}  {span.seconds * 1000:.1f} ms (at +{offset:.0f} ms)"
            f"  {details}{error}"
        )
        for child in sorted(by_parent.get(span.span_id, []), key=lambda s: s.start_ns):
            walk(child, depth + 1)

    walk(root, 0)
    return "\n".join(lines)
