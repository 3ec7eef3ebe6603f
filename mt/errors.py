"""Errors caused by the user's input. The CLI prints them as one line and exits non-zero."""


class MtError(Exception):
    """A problem with a file, a config value or a checkpoint that the user can fix."""


class ConfigError(MtError):
    pass


class DataError(MtError):
    pass


class CheckpointError(MtError):
    pass
