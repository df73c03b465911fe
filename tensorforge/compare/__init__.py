"""compare — see DESIGN.md."""
