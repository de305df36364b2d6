"""Claim and hand over in Chromium: bob claims a request and alice's inbox says "bob is on it" live;
bob hands it to alice and both pages say so, and alice's "Assigned to me" now includes it."""

from playwright.sync_api import expect

from . import test_request_kinds as kinds
from .test_request_kinds import EVENT_TIMEOUT_MS, host_row, pick

# The dashboard fixtures of the request-kinds tests, used here as they are.
reviewer = kinds.reviewer
host_requests = kinds.host_requests


def test_a_claim_and_a_hand_over_show_live_on_every_reviewers_inbox(reviewer, host_requests):
    alice, bob = reviewer("alice"), reviewer("bob")
    host_requests(bob, ["claim-live-1"], prompt="Rotate the signing key?", tool="rotate")
    expect(host_row(alice.page, "claim-live-1")).to_have_count(1, timeout=EVENT_TIMEOUT_MS)

    card = pick(bob.page, host_row(bob.page, "claim-live-1"))
    expect(card.locator(".claim-text")).to_have_text("Nobody is on it yet.")
    card.get_by_role("button", name="Claim").click()
    expect(card.locator(".claim-text")).to_have_text("you are on it", timeout=EVENT_TIMEOUT_MS)
    expect(host_row(alice.page, "claim-live-1").locator(".claim")).to_have_text(
        "bob is on it", timeout=EVENT_TIMEOUT_MS
    )

    card.locator(".hand-to").fill("nobody-here")
    card.get_by_role("button", name="Hand over").click()
    expect(card.locator(".claim-error")).to_have_text("There is no active user 'nobody-here'.")
    card.locator(".hand-to").fill("alice")
    card.get_by_role("button", name="Hand over").click()
    expect(host_row(alice.page, "claim-live-1").locator(".claim")).to_have_text(
        "handed to alice", timeout=EVENT_TIMEOUT_MS
    )
    expect(host_row(alice.page, "claim-live-1")).to_have_attribute("data-assigned", "1")
    expect(card.locator(".claim-text")).to_have_text("handed to alice")
