"""Importers: random family (being written)."""
