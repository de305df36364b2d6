"""Each console process registers the public half of the key it signs with when its supervisor starts, so an
answer it signs verifies with ``GET /api/v1/signing-keys`` and ``verify_audit`` after the key is rotated away."""

import pytest

from approvals.models import SigningKey
from approvals.runs import runner

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """The supervisor started here is stopped with its runs (the fixture is in tests/conftest.py)."""


async def test_the_supervisors_start_registers_the_key_this_process_signs_with(rotate_signing_key):
    earlier = SigningKey(kid="00112233aabbccdd", public_key="A" * 43)  # a key a console signed with before
    await earlier.asave()
    pair = rotate_signing_key()
    await runner.ensure_started()
    registered = {row.kid: row.public_key async for row in SigningKey.objects.all()}
    assert registered == {earlier.kid: earlier.public_key, pair.kid: pair.public_b64}
