"""What a retry runs with after an approval edited its arguments, and the words that tell the model so."""

from approvals.review import answers, outcomes

SCHEMA = {"type": "object", "properties": {"order": {}, "amount": {}, "tags": {}}}


def test_the_retry_gets_the_requests_args_with_the_approved_edits_over_them():
    asked = {"order": "A-7", "amount": 500, "tags": ["a", "b"]}
    data = {"args": {"amount": 50, "tags": ["c"]}, "comment": "half"}
    assert answers.retry_args("approval", asked, data, SCHEMA) == {"order": "A-7", "amount": 50, "tags": ["c"]}
    assert asked == {"order": "A-7", "amount": 500, "tags": ["a", "b"]}  # neither is changed
    assert data == {"args": {"amount": 50, "tags": ["c"]}, "comment": "half"}


def test_only_an_approvals_args_are_edits():
    asked = {"order": "A-7"}
    # An input request's form may have a field named "args": it is the tool's answer, not an edit.
    assert answers.retry_args("input", asked, {"args": {"order": "B-8"}}, SCHEMA) == asked
    assert answers.retry_args("approval", asked, {"comment": "fine"}, SCHEMA) == asked
    assert answers.retry_args("approval", asked, None, SCHEMA) == asked


def test_an_approvals_own_fields_stay_out_of_the_retrys_args():
    asked = {"order": "A-7", "amount": 500}
    data = {"args": {"amount": 50, "note": "half now"}}
    assert answers.retry_args("approval", asked, data, SCHEMA) == {"order": "A-7", "amount": 50}
    # A schema without properties: the call's own arguments may still be edited, nothing else is added.
    assert answers.retry_args("approval", asked, data, {}) == {"order": "A-7", "amount": 50}


def test_the_notice_names_each_change_in_the_decisions_words():
    changes = [{"field": "amount", "from": 500, "to": 50.0}, {"field": "note", "from": "", "to": True}]
    assert outcomes.edit_notice(changes) == (
        " (a reviewer changed amount 500 → 50, note (empty) → yes before approving;"
        " the call ran with the changed values)"
    )
    assert outcomes.edit_notice([]) == ""


def test_a_long_or_many_edits_notice_is_cut_as_the_decision_text_is():
    changes = [{"field": f"f{i}", "from": "x" * 100, "to": i} for i in range(6)]
    notice = outcomes.edit_notice(changes)
    assert notice.startswith(" (a reviewer changed f0 " + "x" * 39 + "… → 0, f1 ")
    assert notice.endswith(" and 2 more changes before approving; the call ran with the changed values)")
