"""operator_sdk.util.conversion_response, run in the controller: the converted objects are
the task's arguments checked against the module's specification, so no module process is
started for them (one per ConversionReview otherwise, in the API server's path)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase
from ansible_collections.operator_sdk.util.plugins.module_utils.conversion import (
    ARGUMENT_SPEC,
    answer_of,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        _, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        answer, problem = answer_of(params)
        if problem is not None:
            result.update(failed=True, msg=problem)
            return result
        result.update(changed=False, conversion_response=answer)
        return result
