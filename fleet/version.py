"""Fleet's version, defined here and only here: `fleet.__version__`, the wheel's metadata
(pyproject.toml reads this file without importing fleet) and `fleetrun --version` all use it."""

__version__ = "0.1.0"
