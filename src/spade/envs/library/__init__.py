"""The hand-written seed environments: one self-contained file each, registered by module name."""
