"""Importers: indexing family (being written)."""
