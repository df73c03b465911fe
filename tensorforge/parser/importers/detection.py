"""Importers: detection family (being written)."""
