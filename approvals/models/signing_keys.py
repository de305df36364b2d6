"""The public halves of the keys this console has signed answers with (approvals/signing/keys.py)."""

from django.db import models
from django.utils import timezone


class SigningKey(models.Model):
    """A public Ed25519 key an answer may be signed with, kept after its private half is rotated away so old
    answers still verify (``GET /api/v1/signing-keys``, ``manage.py verify_audit``). ``kid`` is
    ``console_remote.key_id`` of the raw key; ``public_key`` the raw 32 bytes in unpadded base64url."""

    kid = models.CharField(primary_key=True, max_length=32)
    public_key = models.CharField(max_length=64)
    # When a console process first signed with it (registered at start-up).
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "kid"]

    def __str__(self) -> str:
        return f"signing key {self.kid}"
