#!/usr/bin/env bash
# Install ansible-operator and everything it runs with into one Python
# environment, pinned by constraints.txt. The one install path: the base image
# (Dockerfile), the dev script and CI all go through here, so they cannot drift.
#
#   scripts/install-runtime.sh PYTHON            the runtime, as in the image
#   scripts/install-runtime.sh PYTHON --dev      editable, with test tools
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:?usage: install-runtime.sh PYTHON [--dev]}
mode=${2:-}

"$python" -m pip install --quiet --upgrade pip
if [[ $mode == --dev ]]; then
  "$python" -m pip install --quiet -c "$root/constraints.txt" -e "$root[test]"
else
  "$python" -m pip install --quiet -c "$root/constraints.txt" "$root"
fi
# kubernetes.core, from the pinned `ansible` release, without the rest of it.
"$python" "$root/scripts/install_kubernetes_core.py" --constraints "$root/constraints.txt"
