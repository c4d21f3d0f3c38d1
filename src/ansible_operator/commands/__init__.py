"""The `ansible-operator` subcommands, one module each."""
