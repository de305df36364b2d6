"""RemoteWaitFor lives in ``console_remote`` (no Django); this name stays for hosts that import it from here."""

from console_remote import (  # noqa: F401
    DEFAULT_ATTEMPTS,
    EXPIRY_GRACE_SECONDS,
    READ_MARGIN_SECONDS,
    RETRYABLE_STATUSES,
    WITHDRAW_TIMEOUT_SECONDS,
    RemoteAuthError,
    RemoteRequestError,
    RemoteSignatureError,
    RemoteUnreachableError,
    RemoteWaitFor,
    RemoteWaitForError,
)
