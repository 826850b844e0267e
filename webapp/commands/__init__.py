"""One module per ``streamscope`` subcommand (see webapp.cli)."""
