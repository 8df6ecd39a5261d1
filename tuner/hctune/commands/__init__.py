"""One module per `hctune` subcommand; each defines `command` (a click.Command) and stays thin."""
