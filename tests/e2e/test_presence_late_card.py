"""Presence says who looks at THAT request: a reviewer looks at the request they picked, not at every
row their inbox lists. A card drawn after the news (picked later) says who is here all the same."""

from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, host_row, pick


def test_a_card_picked_after_the_presence_frame_says_who_is_here(reviewer, host_requests):
    alice, bob = reviewer("alice"), reviewer("bob")
    [alices_row] = host_requests(alice, ["presence-late-1"], prompt="Rotate the signing key?")
    bobs_row = host_row(bob.page, "presence-late-1")
    expect(bobs_row).to_be_in_viewport(timeout=EVENT_TIMEOUT_MS)
    pick(alice.page, alices_row)  # alice looks at it: bob's row says so
    expect(bobs_row.locator(".presence")).to_have_text("also here: alice", timeout=EVENT_TIMEOUT_MS)

    card = pick(bob.page, bobs_row)  # drawn now, after the frame that said alice is here
    expect(card.locator("header .presence")).to_have_text("also here: alice", timeout=EVENT_TIMEOUT_MS)


def test_also_here_names_only_the_request_the_other_reviewer_picked(reviewer, host_requests):
    alice, bob = reviewer("alice"), reviewer("bob")
    host_requests(alice, ["presence-x", "presence-y"], prompt="Rotate key {id}?")
    x_for_bob = host_row(bob.page, "presence-x")
    expect(x_for_bob).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    x_for_alice, y_for_alice = (host_row(alice.page, i) for i in ("presence-x", "presence-y"))
    expect(y_for_alice).to_be_in_viewport()  # both rows are on both screens

    pick(bob.page, x_for_bob)
    expect(x_for_alice.locator(".presence")).to_have_text("also here: bob", timeout=EVENT_TIMEOUT_MS)
    # Bob's page said what it looks at before it said X: had Y counted, alice would know it by now.
    assert y_for_alice.locator(".presence").text_content() == ""
