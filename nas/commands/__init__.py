"""One module per ``hwnas`` command group; each exposes ``add_parser(subparsers)``."""
