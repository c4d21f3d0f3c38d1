"""Static checks of an operator project: what `ansible-operator check` reports.

`findings` is the report's vocabulary, `yaml_nodes` reads YAML with line
numbers, `jinja_types` works out what a Jinja expression yields, `templating`
holds the ansible-core 2.19 templating rules, `ansible_load` loads roles and
playbooks with the installed ansible-core, and `project` finds what to check.
"""
