"""Importers: reduce family (being written)."""
