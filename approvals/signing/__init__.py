"""The console's signature on each Answer it resolves, and the digest of the call a request guards.

``console_remote`` defines the bytes (RFC 8785 canonical JSON, ``call_digest``, ``signed_statement``) so a host
checks what the console signed with the same definition; this package holds the console's side: its Ed25519 key
(``keys``) and the signature the door stores with an answer (``answers``). docs/signing.md says what is signed.
"""
