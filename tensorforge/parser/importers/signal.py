"""Importers: signal family (being written)."""
