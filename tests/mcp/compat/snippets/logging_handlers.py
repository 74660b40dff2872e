# logging: dictConfig, a rotating file handler, formatters, per-module loggers.
import io
import logging
import logging.config
import logging.handlers
import os
import tempfile
from pathlib import Path

work = Path(tempfile.mkdtemp(prefix="compat_logging_", dir=os.getcwd()))
stream = io.StringIO()
logging.config.dictConfig({
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "mem": {"class": "logging.StreamHandler", "stream": stream, "formatter": "plain"},
        "file": {
            "class": "logging.handlers.RotatingFileHandler",
            "filename": str(work / "app.log"),
            "maxBytes": 2000,
            "backupCount": 3,
            "formatter": "plain",
        },
    },
    "loggers": {"compat.app": {"level": "DEBUG", "handlers": ["mem", "file"], "propagate": False}},
})
log = logging.getLogger("compat.app")
child = logging.getLogger("compat.app.db")
log.debug("starting %s", "up")
child.info("connected to %s:%d", "db", 5432)
try:
    1 / 0
except ZeroDivisionError:
    log.exception("failed")
for i in range(200):
    log.info("message number %04d", i)
text = stream.getvalue()
assert text.startswith("DEBUG compat.app starting up\nINFO compat.app.db connected to db:5432\n"), text[:200]
assert "ZeroDivisionError: division by zero" in text
rotated = sorted(p.name for p in work.glob("app.log*"))
assert rotated == ["app.log", "app.log.1", "app.log.2", "app.log.3"], rotated
assert "message number 0199" in (work / "app.log").read_text()

mem = logging.handlers.MemoryHandler(capacity=10, target=logging.StreamHandler(io.StringIO()))
other = logging.getLogger("compat.buffered")
other.addHandler(mem)
other.setLevel(logging.INFO)
other.info("buffered")
assert len(mem.buffer) == 1
mem.flush()
assert mem.target.stream.getvalue() == "buffered\n"
other.removeHandler(mem)
for h in list(log.handlers):
    h.close()
    log.removeHandler(h)
logging.captureWarnings(False)
print("OK logging_handlers")
