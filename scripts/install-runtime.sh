#!/usr/bin/env bash
# Install ansible-operator and everything it runs with into one Python
# environment, pinned by constraints.txt. The one install path: the base image
# (Dockerfile), the dev script and CI all go through here, so they cannot drift.
#
#   scripts/install-runtime.sh PYTHON            the runtime, as in the image
#   scripts/install-runtime.sh PYTHON --dev      editable, with test tools
#
# CONSTRAINTS (default: constraints.txt) names another pin set, relative to the
# repository or absolute, such as constraints-ansible-core-2.18.txt for the
# ansible-core 2.18 flavour (scripts/ansible_env.py writes the 2.19 and 2.20 ones).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:?usage: install-runtime.sh PYTHON [--dev]}
mode=${2:-}
constraints=${CONSTRAINTS:-constraints.txt}
[[ $constraints == /* ]] || constraints=$root/$constraints

"$python" -m pip install --quiet --upgrade pip
if [[ $mode == --dev ]]; then
  "$python" -m pip install --quiet -c "$constraints" -e "$root[test]"
else
  "$python" -m pip install --quiet -c "$constraints" "$root"
fi
# kubernetes.core, from the pinned `ansible` release, without the rest of it.
"$python" "$root/scripts/install_kubernetes_core.py" --constraints "$constraints"
