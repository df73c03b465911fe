"""The package version and the engine file format version (bumped on any incompatible change)."""

__version__ = "0.1.0"
ENGINE_FORMAT_VERSION = 2          # 2: no kernel source text in the manifest (regenerated at load)
