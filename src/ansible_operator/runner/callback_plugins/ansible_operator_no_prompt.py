"""Ansible callback: a play's `vars_prompt` ends the run at once, saying why.

Loaded by every run (its directory is on ANSIBLE_CALLBACK_PLUGINS and it
needs no enabling). A run has no one at its terminal: Ansible would wait for
an answer until the run's timeout, every reconcile. Ansible tells callbacks
which variable it is about to prompt for (only those not given as extra
variables, which is where an object's spec goes), so the run stops there with
an error that names the variable and where to give it.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: ansible_operator_no_prompt
type: aggregate
short_description: refuses vars_prompt in ansible-operator's runs
description: Ends a run whose play would prompt for a variable, naming it.
"""

PROMPT_REFUSED_EXIT = 1  # ansible-playbook's own code for an error


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ansible_operator_no_prompt"
    CALLBACK_NEEDS_ENABLED = False

    def v2_playbook_on_vars_prompt(
        self,
        varname: str,
        private: bool = True,
        prompt: str | None = None,
        *_rest: Any,
        **_more: Any,
    ) -> None:
        asked = f" ({prompt!r})" if prompt else ""
        self._display.error(
            f"the play's vars_prompt asks for {varname!r}{asked}, and an operator's run has "
            f"no one to answer: give {varname} in the object's spec or as an extra variable "
            "(the watch's vars), or remove the prompt"
        )
        # Raised past Ansible's callback dispatch, which only warns of exceptions.
        raise SystemExit(PROMPT_REFUSED_EXIT)
