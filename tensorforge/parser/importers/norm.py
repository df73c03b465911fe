"""Importers: norm family (being written)."""
