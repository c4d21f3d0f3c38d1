"""A generic controller (controller-runtime's): work queue, event handlers, predicates,
finalizers. It knows nothing of Ansible."""
