"""The environment memory: the archive, its records and its selection policies."""
