"""Exceptions raised by memoryd.

Every error the package raises on purpose derives from :class:`MemorydError`. The API layer maps
the classes below to HTTP statuses in one table (``memoryd.api.errors``); the CLI turns them into a
one-line message and a non-zero exit code. Nothing here knows about HTTP.

    MemorydError
    ├── ConfigError                 a setting is missing or has a bad value
    ├── InvalidInputError           a request is well-formed JSON but its content is not allowed
    │   ├── InvalidUserIdError      a user id that cannot name a directory
    │   └── PayloadTooLargeError    a request body over the size its route accepts
    ├── NotFoundError
    │   ├── UserNotFoundError
    │   ├── TurnNotFoundError
    │   └── MemoryNotFoundError
    ├── ConflictError               the request contradicts stored state (e.g. turn_id reused)
    ├── ModelMissingError           a model artifact is not built (run `make models`)
    ├── DataDirBusyError            another memoryd process holds the data directory
    ├── DaemonUnavailableError      no daemon answers at a URL (clients, the stdio bridge)
    ├── StoreError                  a storage engine failed; the message names the store
    │   ├── JournalError
    │   │   ├── DiskFullError       no space left for a journal write (nothing was written)
    │   │   └── JournalDamagedError a journal that fails SQLite's integrity check
    │   ├── GraphError
    │   └── VectorIndexError
    ├── ClosedError                 a component was used after close()
    └── LLMError                    an LLM call failed (background work; names the backend)
        ├── LLMUnavailableError     model file missing, server unreachable
        ├── LLMTimeoutError         no answer within the timeout
        └── LLMOutputError          the answer is not JSON or does not fit the schema
"""

from __future__ import annotations


class MemorydError(Exception):
    """Base class of every error memoryd raises on purpose."""


class ConfigError(MemorydError):
    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"setting {key!r} has bad value {value!r}: {allowed}")


class InvalidInputError(MemorydError):
    """The request's content is not allowed (the message says what and why)."""


class PayloadTooLargeError(InvalidInputError):
    """A request body over the size its route accepts."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"request body is over {limit} bytes")


class InvalidUserIdError(InvalidInputError):
    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        shown = user_id if len(user_id) <= 80 else user_id[:77] + "..."
        super().__init__(
            f"user id {shown!r} is not allowed: use 1-64 characters from A-Z a-z 0-9 _ -"
        )


class NotFoundError(MemorydError):
    """Something asked for by id does not exist."""


class UserNotFoundError(NotFoundError):
    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        super().__init__(f"user {user_id!r} has no stored data")


class TurnNotFoundError(NotFoundError):
    def __init__(self, user_id: str, turn_id: str) -> None:
        self.user_id, self.turn_id = user_id, turn_id
        super().__init__(f"user {user_id!r} has no turn {turn_id!r}")


class MemoryNotFoundError(NotFoundError):
    def __init__(self, user_id: str, memory_id: str) -> None:
        self.user_id, self.memory_id = user_id, memory_id
        super().__init__(f"user {user_id!r} has no memory {memory_id!r}")


class ConflictError(MemorydError):
    """The request contradicts what is stored."""


class ModelMissingError(MemorydError):
    def __init__(self, path: str, what: str) -> None:
        self.path = path
        super().__init__(f"{what} not found at {path}: build it with `make models`")


class DataDirBusyError(MemorydError):
    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"data directory {path} is in use by another memoryd process"
            " (stop the daemon, or talk to it over HTTP)"
        )


class DaemonUnavailableError(MemorydError):
    """No memoryd daemon answers at ``url`` (raised on the client side)."""

    def __init__(self, url: str, detail: str = "") -> None:
        self.url = url
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"no memoryd daemon answers at {url}{why}: start it with `memoryd serve` "
            "(or pass --url)"
        )


class StoreError(MemorydError):
    """A storage engine failed. ``store`` names it; the cause is chained."""

    store = "store"

    def __init__(self, detail: str) -> None:
        super().__init__(f"{self.store}: {detail}")


class JournalError(StoreError):
    store = "journal"


class DiskFullError(JournalError):
    """The file system holding the data is full: the write was not stored."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"the file system holding {path} is full: nothing was written; free space and send "
            "it again"
        )


class JournalDamagedError(JournalError):
    """A user's journal fails SQLite's integrity check: it is not used until restored."""

    def __init__(self, user_id: str, problem: str) -> None:
        self.user_id, self.problem = user_id, problem
        super().__init__(
            f"the journal of user {user_id!r} is damaged ({problem}) and is not used: restore "
            f"it with `memoryd restore BACKUP --user {user_id}` (daemon stopped), or delete the "
            "user; `memoryd doctor --deep` checks every journal"
        )


class GraphError(StoreError):
    store = "graph"


class VectorIndexError(StoreError):
    store = "vectors"


class ClosedError(MemorydError):
    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is closed")


class LLMError(MemorydError):
    """An LLM call failed. ``backend`` names the LLM (e.g. ``llamacpp:model.gguf``)."""

    def __init__(self, backend: str, detail: str) -> None:
        self.backend = backend
        super().__init__(f"LLM {backend}: {detail}")


class LLMUnavailableError(LLMError):
    """The model cannot be used: its file is missing, or its server does not answer."""


class LLMTimeoutError(LLMError):
    def __init__(self, backend: str, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(backend, f"no answer within {seconds:g} s")


class LLMOutputError(LLMError):
    """The answer is not JSON or does not fit the schema; ``raw`` is the answer as received.
    The message leaves the answer out: it may repeat what the user said, and messages are
    logged."""

    def __init__(self, backend: str, problem: str, raw: str) -> None:
        self.problem, self.raw = problem, raw
        super().__init__(backend, f"bad answer ({problem}; {len(raw)} characters)")
