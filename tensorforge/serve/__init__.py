"""serve — engines behind the Open Inference Protocol (KServe v2): Ray Serve replicas, or a Triton model repository.

Entry points: `tensorforge serve` (cli/serve_cmd.py → `app.deploy`), `tensorforge export-triton`
(cli/export_triton_cmd.py → `triton_export.export_repository`). Pure parts (protocol codecs, batching, the
replica's engine model) import no Ray, so `import tensorforge` and `export-triton` never load Ray.
Imports api, engine, runtime, util; nothing imports serve but cli.
"""
