"""Testing helpers for operator authors (also a pytest plugin: see `plugin`)."""
