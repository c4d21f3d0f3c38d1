"""An action plugin that ends the process it runs in, as a broken plugin could."""

import sys

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        sys.exit(4)
