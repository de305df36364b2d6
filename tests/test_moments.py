"""A time as people read it, written one way by the server (approvals.moments) as by the scripts
(console/dom.js readableTime): in UTC, with its zone, never AM/PM, never the server's local clock."""

from datetime import UTC, datetime, timedelta, timezone

from approvals.moments import readable_time


def test_a_time_reads_as_a_clock_today_and_a_date_before():
    now = datetime(2026, 12, 4, 18, 0, tzinfo=UTC)
    assert readable_time(datetime(2026, 12, 4, 16, 32, 31, 753811, tzinfo=UTC), now) == "16:32 UTC"
    assert readable_time(datetime(2026, 12, 3, 16, 32, 31, tzinfo=UTC), now) == "3 Dec 16:32 UTC"
    assert readable_time(datetime(2025, 1, 9, 7, 5, tzinfo=UTC), now) == "9 Jan 2025 07:05 UTC"
    assert readable_time(datetime(2027, 1, 9, 7, 5, tzinfo=UTC), now) == "9 Jan 2027 07:05 UTC"


def test_a_moment_in_another_zone_is_written_in_utc_and_its_day_is_utcs():
    now = datetime(2026, 12, 4, 1, 0, tzinfo=UTC)
    new_york = timezone(timedelta(hours=-5))
    # 20:14 on the 3rd in New York is 01:14 on the 4th in UTC: today, as UTC counts days.
    assert readable_time(datetime(2026, 12, 3, 20, 14, tzinfo=new_york), now) == "01:14 UTC"
    assert readable_time(datetime(2026, 12, 3, 18, 59, tzinfo=new_york), now) == "3 Dec 23:59 UTC"
