"""Importers: shape family (being written)."""
