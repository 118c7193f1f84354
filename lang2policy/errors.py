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


class InvalidIntentError(Lang2PolicyError):
    """A skill call from policy code has unknown or bad arguments; nothing was executed."""


class PolicyError(ConfigError):
    """A privilege-policy file is malformed (unknown key, bad condition, unknown zone)."""


class PolicyWideningError(PolicyError):
    """A plan-level policy tried to allow more than the policy it narrows."""


class MotionTimeExceeded(Lang2PolicyError):
    """A motion ran past its time budget; the arm was stopped where it was."""


class SandboxError(Lang2PolicyError):
    """The sandbox could not be started or its child broke the protocol."""


class LLMError(Lang2PolicyError):
    """Root of the errors of the LLM layer (client, local model server, record/replay cache)."""


class LLMUnavailableError(LLMError):
    """The LLM server could not be reached, kept failing (5xx, rate limit) or did not start."""


class LLMAuthError(LLMError):
    """The API key is missing or was rejected (401/403); the message names its env variable."""


class LLMTimeoutError(LLMError):
    """The LLM server did not answer (or did not become ready) within the time limit."""


class LLMRequestError(LLMError):
    """The server rejected the request itself (4xx other than auth), or it could not be built."""


class LLMResponseError(LLMError):
    """The answer is unusable: empty, or cut off at max_tokens; ``reply`` holds what came back."""

    def __init__(self, message: str, reply: object = None) -> None:
        super().__init__(message)
        self.reply = reply


class ReplayMissError(LLMError):
    """A replay-only client was asked a request that its cache file does not hold."""


class RewardSpecError(ConfigError):
    """A reward spec is malformed: unknown term, object or parameter, wrong type, NaN/inf."""


class PolicyBackendError(Lang2PolicyError):
    """A VLA policy backend (the local model or a remote policy server) gave no usable action
    chunk: unreachable, too slow, an answer malformed, oversized or reporting an error. No
    action was returned, so the caller holds the arm."""
