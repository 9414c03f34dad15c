"""`python -m memoryd` runs the CLI."""

from memoryd.cli import main

main()
