# Signals sent to this process: os.kill(os.getpid(), ...), raise_signal, pthread_kill,
# sigwait on a blocked signal, SIGCHLD from a child, and a SIGTERM handler in a child.
import os
import signal
import subprocess
import sys
import threading
import time

got = []
handlers = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD, signal.SIGHUP)}
try:
    signal.signal(signal.SIGUSR1, lambda s, f: got.append(("usr1", s)))
    os.kill(os.getpid(), signal.SIGUSR1)
    for _ in range(100):
        if got:
            break
        time.sleep(0.01)
    assert got == [("usr1", signal.SIGUSR1)], got

    signal.signal(signal.SIGUSR2, lambda s, f: got.append(("usr2", s)))
    signal.raise_signal(signal.SIGUSR2)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
    time.sleep(0.05)
    assert got[1:] == [("usr2", signal.SIGUSR2), ("usr1", signal.SIGUSR1)], got

    signal.signal(signal.SIGHUP, lambda s, f: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        signal.pthread_kill(threading.main_thread().ident, signal.SIGHUP)
        assert signal.SIGHUP in signal.sigpending()
        assert signal.sigwait({signal.SIGHUP}) == signal.SIGHUP
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})

    children = []
    signal.signal(signal.SIGCHLD, lambda s, f: children.append(s))
    subprocess.run(["true"], check=True)
    for _ in range(100):
        if children:
            break
        time.sleep(0.01)
    assert children, "no SIGCHLD"
finally:
    for s, h in handlers.items():
        signal.signal(s, h)

child_code = (
    "import os, signal, sys, time\n"
    "def bye(s, f):\n"
    "    os.write(1, b'caught %d\\n' % s)\n"
    "    os._exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "print('ready', flush=True)\n"
    "time.sleep(30)\n"
)
p = subprocess.Popen([sys.executable, "-c", child_code], stdout=subprocess.PIPE, text=True)
assert p.stdout.readline() == "ready\n"
p.send_signal(signal.SIGTERM)
out, _ = p.communicate(timeout=10)
assert p.returncode == 0 and out == f"caught {int(signal.SIGTERM)}\n", (p.returncode, out)

p = subprocess.Popen(["sleep", "30"])
p.terminate()
assert p.wait(timeout=10) == -signal.SIGTERM
p = subprocess.Popen(["sleep", "30"])
p.kill()
assert p.wait(timeout=10) == -signal.SIGKILL
g = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"], start_new_session=True)
time.sleep(0.2)
os.killpg(g.pid, signal.SIGTERM)
assert g.wait(timeout=10) == -signal.SIGTERM
trap = subprocess.Popen(["sh", "-c", "trap 'exit 3' INT; echo armed; while :; do sleep 0.05; done"],
                        stdout=subprocess.PIPE, text=True)
assert trap.stdout.readline() == "armed\n"
trap.send_signal(signal.SIGINT)
assert trap.wait(timeout=10) == 3
trap.stdout.close()
print("OK signal_kill_self")
