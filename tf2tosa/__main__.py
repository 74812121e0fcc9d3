"""``python -m tf2tosa``: the command line."""

from .cli import main

main()
