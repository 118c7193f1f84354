"""The exception hierarchy: one root class so callers can catch every lang2policy error."""


class Lang2PolicyError(Exception):
    """Root of every error raised on purpose by lang2policy."""


class ConfigError(Lang2PolicyError):
    """A configuration file or value is missing, unknown or out of range."""


class InvalidCommandError(Lang2PolicyError):
    """A robot command was rejected (wrong shape, NaN/inf, unknown joint); nothing was sent."""


class UnreachableError(Lang2PolicyError):
    """A motion target cannot be reached; the arm was left where it was."""


class UnknownObjectError(Lang2PolicyError):
    """A named object is not in the scene; the message lists the objects that are."""


class NotConnectedError(Lang2PolicyError):
    """A robot method that needs a connection was called before ``connect()``."""
