"""codegen — see DESIGN.md."""
