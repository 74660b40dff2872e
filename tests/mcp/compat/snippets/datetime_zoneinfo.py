# Dates, times and time zones (zoneinfo reads the system tz database).
import calendar
import time
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, available_timezones

ny = ZoneInfo("America/New_York")
berlin = ZoneInfo("Europe/Berlin")
# DST starts in New York on 2024-03-10 at 02:00.
before = datetime(2024, 3, 10, 1, 30, tzinfo=ny)
after = before + timedelta(hours=1)
assert before.utcoffset() == timedelta(hours=-5)
assert (before.astimezone(timezone.utc) + timedelta(hours=1)).astimezone(ny).hour == 3
assert after.utcoffset() == timedelta(hours=-5)  # wall-clock arithmetic, as documented
meeting = datetime(2024, 7, 1, 15, 0, tzinfo=berlin)
assert meeting.astimezone(ny).strftime("%H:%M %Z") == "09:00 EDT"
assert meeting.astimezone(ZoneInfo("Asia/Kolkata")).utcoffset() == timedelta(hours=5, minutes=30)
assert "Europe/Paris" in available_timezones()
assert ZoneInfo("UTC").utcoffset(datetime(2024, 1, 1)) == timedelta(0)

parsed = datetime.strptime("2024-02-29 23:59:58", "%Y-%m-%d %H:%M:%S")
assert (parsed + timedelta(seconds=3)).isoformat() == "2024-03-01T00:00:01"
assert datetime.fromisoformat("2024-05-06T07:08:09+02:00").astimezone(timezone.utc).hour == 5
assert date(2024, 12, 31).isocalendar()[1] == 1
assert calendar.isleap(2024) and calendar.monthrange(2023, 2) == (2, 28)
assert (date(2025, 1, 1) - date(2024, 1, 1)).days == 366

now = datetime.now(timezone.utc)
assert abs(now.timestamp() - time.time()) < 5
assert time.gmtime(0).tm_year == 1970
assert time.strftime("%Y", time.localtime()) == str(datetime.now().year)
t0 = time.perf_counter()
time.sleep(0.05)
assert 0.04 < time.perf_counter() - t0 < 2
assert time.monotonic() > 0 and time.process_time() >= 0
print("OK datetime_zoneinfo")
