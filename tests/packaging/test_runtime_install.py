"""The image's install steps (scripts/install-runtime.sh, what the Dockerfile
runs) give a working runtime from a plain, non-editable install: the console
script, the event plugin ansible-runner loads, our operator_sdk.util
collection and kubernetes.core."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, importlib.metadata as md, pathlib
from ansible_operator.collections import COLLECTIONS_PATH
import ansible_collections.kubernetes.core as core
util = pathlib.Path(COLLECTIONS_PATH) / "ansible_collections/operator_sdk/util/plugins/modules"
print(json.dumps({
    "plugins": [e.value for e in md.entry_points(group="ansible_runner.plugins")],
    "util_modules": sorted(p.stem for p in util.glob("*.py"))
        + sorted(p.stem for p in (util.parent / "module_utils").glob("*.py"))
        + sorted(p.stem for p in (util.parent / "action").glob("*.py")),
    "core": json.loads((pathlib.Path(core.__path__[0]) / "MANIFEST.json").read_text())
        ["collection_info"]["version"],
    "editable": "site-packages" not in str(COLLECTIONS_PATH),
}))
"""


def test_install_script_gives_a_complete_runtime(tmp_path: Path) -> None:
    # The image's environment: a PYTHONPATH the tests run with (the source tree's src)
    # would have the probe import the source instead of what was installed.
    image_env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env_dir = tmp_path / "image-env"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(ROOT / "scripts" / "install-runtime.sh"), str(python)],
        check=True,
        timeout=600,
        cwd=tmp_path,
        env=image_env,
    )
    version = subprocess.run(
        [str(env_dir / "bin" / "ansible-operator"), "--version"],
        check=True,
        capture_output=True,
        text=True,
        env=image_env,
    ).stdout
    assert "ansible-operator" in version
    probe = json.loads(
        subprocess.run(
            [str(python), "-c", PROBE],
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=image_env,
        ).stdout
    )
    assert probe["plugins"] == ["ansible_operator.runner.event_plugin"]
    assert probe["util_modules"] == [
        "admission_response",
        "conversion_response",
        "k8s_event",
        "k8s_status",
        "osdk_metric",
        "requeue_after",
        "admission",
        "conversion",
        "k8s_auth",
        "k8s_lookup",
        "status_merge",
        "admission_response",
        "conversion_response",
    ]
    assert probe["core"].startswith("6.")
    assert not probe["editable"], "the image installs a wheel, not the source tree"
