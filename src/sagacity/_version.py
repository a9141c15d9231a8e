"""The package's version, in a module of its own so that any module can name it without importing
the package root (which type-imports the whole API). Hatch reads it from here at build time."""

__version__ = "0.1.0"
