"""Importers: rnn family (being written)."""
