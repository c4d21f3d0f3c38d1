"""The controller: work queue, reconciler, status, events, leader election, manager."""
