"""Verification helpers: the LiteRT oracle (run in a subprocess) and comparison utilities."""
