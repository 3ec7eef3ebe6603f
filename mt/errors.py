"""Errors caused by the user's input. The CLI prints them as one line and exits non-zero."""

import importlib


class MtError(Exception):
    """A problem with a file, a config value or a checkpoint that the user can fix."""


class ConfigError(MtError):
    pass


class DataError(MtError):
    pass


class CheckpointError(MtError):
    pass


class HttpError(MtError):
    """A request `mt serve` refuses: its HTTP status, one line, and headers (Retry-After)."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def needs(module: str, package: str, extra: str):
    """The module `module` of the optional `extra`, or one line saying which package installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MtError(f"this needs {package}: pip install 'mt[{extra}]'") from None
