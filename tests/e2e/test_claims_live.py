"""Claim and hand over in Chromium, from the sticky bar of the picked request: bob claims one and alice's
inbox says "bob is on it" live;
bob hands it to alice and both pages say so, and alice's "Assigned to me" now includes it."""

from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, host_row, pick


def test_a_claim_and_a_hand_over_show_live_on_every_reviewers_inbox(reviewer, host_requests):
    alice, bob = reviewer("alice"), reviewer("bob")
    host_requests(bob, ["claim-live-1"], prompt="Rotate the signing key?", tool="rotate")
    expect(host_row(alice.page, "claim-live-1")).to_have_count(1, timeout=EVENT_TIMEOUT_MS)

    pick(bob.page, host_row(bob.page, "claim-live-1"))
    bar = bob.page.locator("#focus-bar")
    expect(bar.locator(".claim-text")).to_have_text("Nobody is on it yet.")
    bar.get_by_role("button", name="Claim").click()
    expect(bar.locator(".claim-text")).to_have_text("you are on it", timeout=EVENT_TIMEOUT_MS)
    expect(host_row(alice.page, "claim-live-1").locator(".claim")).to_have_text(
        "bob is on it", timeout=EVENT_TIMEOUT_MS
    )

    bar.get_by_role("button", name="Hand over…").click()
    bar.locator(".hand-to").fill("nobody-here")
    bar.locator(".hand-to").press("Enter")
    expect(bar.locator(".claim-error")).to_have_text("There is no active user 'nobody-here'.")
    bar.locator(".hand-to").fill("alice")
    bar.get_by_role("button", name="Hand over", exact=True).click()
    expect(host_row(alice.page, "claim-live-1").locator(".claim")).to_have_text(
        "handed to alice", timeout=EVENT_TIMEOUT_MS
    )
    expect(host_row(alice.page, "claim-live-1")).to_have_attribute("data-assigned", "1")
    expect(bar.locator(".claim-text")).to_have_text("handed to alice")
