"""The OpenEnv server of the package."""
