# Low-level process control: os.fork, os.pipe, waitpid, exit statuses, posix_spawn, exec.
import os
import signal
import sys

r, w = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        os.close(r)
        os.write(w, f"child {os.getpid()} of {os.getppid()}".encode())
        os.close(w)
    finally:
        os._exit(7)
os.close(w)
msg = b""
while chunk := os.read(r, 1024):
    msg += chunk
os.close(r)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7
assert msg.decode() == f"child {pid} of {os.getpid()}"

pid = os.fork()
if pid == 0:
    os.kill(os.getpid(), signal.SIGKILL)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL

pid = os.fork()
if pid == 0:
    try:
        os.execv("/bin/sh", ["sh", "-c", "exit 5"])
    finally:
        os._exit(99)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 5

r, w = os.pipe()
os.set_inheritable(w, True)
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", "import os,sys; os.write(int(sys.argv[1]), b'spawned')", str(w)],
                     os.environ, file_actions=[(os.POSIX_SPAWN_CLOSE, r)])
os.close(w)
assert os.read(r, 100) == b"spawned"
os.close(r)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
pid = os.spawnlp(os.P_NOWAIT, "true", "true")
assert os.waitpid(pid, 0)[1] == 0
assert os.spawnvp(os.P_WAIT, "sh", ["sh", "-c", "exit 3"]) == 3
pgid = os.getpgid(0)
assert pgid > 0 or pgid == 0
print("OK os_fork_pipe")
