# What scripts ask about their environment: user, host, platform, CPUs, paths, locale.
import getpass
import locale
import os
import platform
import pwd
import grp
import resource
import shutil
import socket
import sys
import sysconfig
import tempfile
from pathlib import Path

user = getpass.getuser()
assert user, user
entry = pwd.getpwuid(os.getuid())
assert entry.pw_name == user and entry.pw_dir
assert grp.getgrgid(os.getgid()).gr_name
home = Path.home()
assert home.is_dir(), home
probe = Path(tempfile.gettempdir()) / f"compat_probe_{os.getpid()}"
probe.write_text("x")
probe.unlink()
assert os.access(os.getcwd(), os.W_OK)
assert socket.gethostname()
uname = platform.uname()
assert uname.system == "Linux" and uname.machine
assert platform.python_version().startswith("3.")
assert platform.platform()
assert (os.cpu_count() or 0) >= 1 and len(os.sched_getaffinity(0)) >= 1
assert os.getloadavg()[0] >= 0
assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 64
assert shutil.which("sh") and shutil.which("ls")
assert shutil.which("python3") or shutil.which("python")
assert locale.getpreferredencoding(False).lower().replace("-", "") == "utf8"
locale.setlocale(locale.LC_ALL, "")
assert locale.getlocale()[1] is None or "utf" in locale.getlocale()[1].lower().replace("-", "")
assert sys.getfilesystemencoding() == "utf-8"
assert sysconfig.get_paths()["purelib"]
assert os.path.exists(sys.executable)
assert os.environ.get("PATH")
os.environ["COMPAT_FLAG"] = "1"
assert os.getenv("COMPAT_FLAG") == "1"
del os.environ["COMPAT_FLAG"]
assert os.getpid() > 0 and os.getppid() >= 0
assert os.urandom(8) != os.urandom(8)
print("OK system_info")
