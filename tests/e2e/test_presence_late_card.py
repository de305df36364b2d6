"""Presence reaches a request's card even when the card is drawn after the news: a reviewer who picks a
request someone else is already looking at is told so at once, not at the next presence frame."""

from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, host_row, pick


def test_a_card_picked_after_the_presence_frame_says_who_is_here(reviewer, host_requests):
    alice, bob = reviewer("alice"), reviewer("bob")
    [alices_row] = host_requests(alice, ["presence-late-1"], prompt="Rotate the signing key?")
    bobs_row = host_row(bob.page, "presence-late-1")
    expect(bobs_row).to_be_in_viewport(timeout=EVENT_TIMEOUT_MS)
    expect(alices_row).to_be_in_viewport()  # alice has it on screen: bob's row says so
    expect(bobs_row.locator(".presence")).to_have_text("also here: alice", timeout=EVENT_TIMEOUT_MS)

    card = pick(bob.page, bobs_row)  # drawn now, after the frame that said alice is here
    expect(card.locator("header .presence")).to_have_text("also here: alice", timeout=EVENT_TIMEOUT_MS)
