"""What Ansible printed about a run that ended before reporting results: its
error, at the file:line it names.

A playbook or role that does not parse (bad YAML, an unknown module, a role
that is not there) stops ansible-playbook before any task runs, so no event
says where; only its output does, in one of two shapes:

    [ERROR]: YAML parsing failed: ...          (ansible-core 2.19 and later)
    Origin: /project/playbooks/site.yml:9:1

    ERROR! couldn't resolve module/action ...  (ansible-core 2.18)
    The error appears to be in '/project/roles/x/tasks/main.yml': line 2, column 3, ...
"""

from __future__ import annotations

import re
from pathlib import Path

from ansible_operator.runner.events import short_location

_ERROR = re.compile(r"^(?:\[ERROR\]:|ERROR!)\s*(?P<message>.*)$")
_ORIGIN = re.compile(r"^Origin:\s*(?P<location>\S.*?:\d+)(?::\d+)?\s*$")
_APPEARS = re.compile(r"The error appears to be in '(?P<file>[^']+)': line (?P<line>\d+)")
MAX_MESSAGE_LINES = 4


def located_error(output: str, base: Path | None = None) -> str:
    """`FILE:LINE: MESSAGE` for the last error in `output`, FILE relative to
    `base` (default: the working directory) when under it; the message alone
    when no location is printed; "" when there is no error."""
    lines = output.splitlines()
    starts = [index for index, line in enumerate(lines) if _ERROR.match(line.strip())]
    if not starts:
        return ""
    start = starts[-1]
    message, location = _message_and_location(lines[start:])
    if location:
        return f"{short_location(location, base)}: {message}"
    return message


def _message_and_location(lines: list[str]) -> tuple[str, str]:
    first = _ERROR.match(lines[0].strip())
    assert first is not None
    message = [first.group("message")]
    location = ""
    in_message = True
    for index, raw in enumerate(lines[1:], start=1):
        line = raw.strip()
        if origin := _ORIGIN.match(line):
            location = origin.group("location")
            break
        # 2.18 wraps this sentence: join it with the next line before matching.
        appears = _APPEARS.search(" ".join(item.strip() for item in lines[index : index + 2]))
        if appears and line.startswith("The error appears"):
            location = f"{appears.group('file')}:{appears.group('line')}"
            break
        if not line:
            in_message = False
        elif in_message and len(message) < MAX_MESSAGE_LINES:
            message.append(line)
    return " ".join(part for part in message if part), location
