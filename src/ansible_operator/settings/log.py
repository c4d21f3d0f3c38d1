"""The operator's own log: the reference's zap flags."""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_operator.settings.declare import setting


@dataclass(frozen=True)
class LogSettings:
    level: str = field(default="info", metadata=setting("--zap-log-level"))
    encoder: str = field(
        default="console", metadata=setting("--zap-encoder", choices=("console", "json"))
    )
    devel: bool = field(
        default=False,
        metadata=setting("--zap-devel", boolean=True, help="development logging (debug level)"),
    )
    # Accepted so that existing manifests start; no effect.
    stacktrace_level: str = field(
        default="error",
        metadata=setting("--zap-stacktrace-level", help="accepted for compatibility"),
    )
    time_encoding: str = field(
        default="epoch",
        metadata=setting("--zap-time-encoding", help="accepted for compatibility"),
    )
