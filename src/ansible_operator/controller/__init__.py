"""A generic controller (controller-runtime's): work queue, workers, event handlers,
predicates, finalizers; what a reconcile takes and gives."""
