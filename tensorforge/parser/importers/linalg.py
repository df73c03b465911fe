"""Importers: linalg family (being written)."""
