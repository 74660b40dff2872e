# Timeouts the Unix way: signal.alarm and setitimer with a Python handler.
import signal
import time


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout(signum)


old = signal.signal(signal.SIGALRM, on_alarm)
try:
    signal.alarm(1)
    t0 = time.monotonic()
    try:
        time.sleep(5)
    except Timeout as e:
        assert e.args == (signal.SIGALRM,)
        assert 0.5 < time.monotonic() - t0 < 3
    else:
        raise AssertionError("the alarm did not fire")
    finally:
        signal.alarm(0)

    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        while True:
            sum(range(1000))
    except Timeout:
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)

    ticks = []
    signal.signal(signal.SIGALRM, lambda s, f: ticks.append(time.monotonic()))
    signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
    deadline = time.monotonic() + 5
    while len(ticks) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    signal.setitimer(signal.ITIMER_REAL, 0)
    assert len(ticks) >= 5, ticks

    prof = []
    old_prof = signal.signal(signal.SIGPROF, lambda s, f: prof.append(s))
    signal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)
    deadline = time.monotonic() + 5
    while not prof and time.monotonic() < deadline:
        sum(i * i for i in range(10000))
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.signal(signal.SIGPROF, old_prof)
    assert prof, "no SIGPROF tick"
finally:
    signal.alarm(0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)
print("OK signal_alarm_itimer")
