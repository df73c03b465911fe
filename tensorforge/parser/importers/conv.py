"""Importers: conv family (being written)."""
