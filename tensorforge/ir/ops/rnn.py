"""IR ops: rnn family (being written)."""
