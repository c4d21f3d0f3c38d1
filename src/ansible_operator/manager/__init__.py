"""The manager: informers, controllers, dependent watches, leader election, health, metrics."""
