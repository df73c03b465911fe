"""cli — thin command-line wiring: `tensorforge exec|convert|inspect|compare`.

Entry point: `main.main(argv)`. Each subcommand is one module with `run(argv) -> exit code`.
Nothing imports this room.
"""
