"""Operator logging: one line per fact, key=value (console) or JSON (--zap-encoder=json).

Messages carry their own key=value fields (kind=, namespace=, name= on every
line about an object), so the console line is greppable as is.
"""

from __future__ import annotations

import json
import logging
import sys

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "panic": logging.CRITICAL,
}


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            body["error"] = self.formatException(record.exc_info)
        return json.dumps(body)


def parse_level(text: str) -> int:
    """zap levels by name, or a number where higher means more verbose (zap's -N)."""
    lowered = text.strip().lower()
    if lowered in LEVELS:
        return LEVELS[lowered]
    try:
        verbosity = int(lowered)
    except ValueError:
        raise ValueError(f"unknown log level {text!r} (debug, info, error or a number)") from None
    return logging.DEBUG if verbosity > 0 else logging.INFO


def configure(level: int = logging.INFO, encoder: str = "console") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if encoder == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(
            logging.Formatter(
                "%(asctime)s %(levelname)-5s %(name)s %(message)s", "%Y-%m-%dT%H:%M:%S"
            )
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("aiohttp.access", "kubernetes", "urllib3"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
