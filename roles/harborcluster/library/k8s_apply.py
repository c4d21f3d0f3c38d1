#!/usr/bin/python
"""k8s_apply: kubernetes.core.k8s, runnable with `async`.

kubernetes.core.k8s comes with a controller-side action plugin (for `src` and
`template` files) that refuses `async` ("This action (kubernetes.core.k8s) does
not support async"). This module is the same module code (kubernetes.core's
module_utils, same options, same results) without that action plugin, so a
task can start several applies in the background (`async:` + `poll: 0`) and
wait for them with `ansible.builtin.async_status`. Use `definition`, not
`src`/`template` (those need the action plugin).
"""

from __future__ import annotations

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import (
    AnsibleModule,
)
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import (
    AUTH_ARG_SPEC,
    DELETE_OPTS_ARG_SPEC,
    NAME_ARG_SPEC,
    RESOURCE_ARG_SPEC,
    WAIT_ARG_SPEC,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import (
    AnsibleK8SModule,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import (
    CoreException,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.runner import (
    run_module,
)

DOCUMENTATION = r"""
module: k8s_apply
short_description: kubernetes.core.k8s without its action plugin, so it supports async
description:
  - Takes the options of kubernetes.core.k8s and returns its results.
  - Only inline C(definition)s; C(src) and C(template) need kubernetes.core.k8s itself.
"""


def argspec() -> dict:
    # kubernetes.core.k8s's own option list (plugins/modules/k8s.py, 6.x)
    spec = copy.deepcopy(NAME_ARG_SPEC)
    spec.update(copy.deepcopy(RESOURCE_ARG_SPEC))
    spec.update(copy.deepcopy(AUTH_ARG_SPEC))
    spec.update(copy.deepcopy(WAIT_ARG_SPEC))
    spec["merge_type"] = dict(type="list", elements="str", choices=["merge", "strategic-merge"])
    spec["validate"] = dict(
        type="dict",
        default=None,
        options=dict(
            fail_on_error=dict(type="bool"),
            version=dict(),
            strict=dict(type="bool", default=True),
        ),
    )
    spec["append_hash"] = dict(type="bool", default=False)
    spec["apply"] = dict(type="bool", default=False)
    spec["template"] = dict(type="raw", default=None)
    spec["delete_options"] = dict(
        type="dict", default=None, options=copy.deepcopy(DELETE_OPTS_ARG_SPEC)
    )
    spec["continue_on_error"] = dict(type="bool", default=False)
    spec["state"] = dict(default="present", choices=["present", "absent", "patched"])
    spec["force"] = dict(type="bool", default=False)
    spec["label_selectors"] = dict(type="list", elements="str")
    spec["generate_name"] = dict()
    spec["server_side_apply"] = dict(
        type="dict",
        default=None,
        options=dict(
            field_manager=dict(type="str", required=True),
            force_conflicts=dict(type="bool", default=False),
        ),
    )
    spec["delete_all"] = dict(type="bool", default=False, aliases=["all"])
    spec["hidden_fields"] = dict(type="list", elements="str")
    return spec


def main() -> None:
    module = AnsibleK8SModule(
        module_class=AnsibleModule,
        argument_spec=argspec(),
        mutually_exclusive=[
            ("resource_definition", "src"),
            ("merge_type", "apply"),
            ("template", "resource_definition"),
            ("template", "src"),
            ("name", "generate_name"),
        ],
        supports_check_mode=True,
    )
    try:
        run_module(module)
    except CoreException as error:
        module.fail_from_exception(error)


if __name__ == "__main__":
    main()
