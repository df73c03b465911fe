"""plugin — see DESIGN.md."""
