# Command-line and configuration parsing: argparse, shlex, configparser, tomllib, getopt.
import argparse
import configparser
import getopt
import shlex
import tomllib

parser = argparse.ArgumentParser(prog="tool", description="demo")
parser.add_argument("inputs", nargs="+")
parser.add_argument("-n", "--count", type=int, default=1)
parser.add_argument("-v", "--verbose", action="count", default=0)
parser.add_argument("--mode", choices=["fast", "slow"], default="fast")
parser.add_argument("--flag", action=argparse.BooleanOptionalAction, default=True)
args = parser.parse_args(shlex.split("a.txt 'b c.txt' -n 3 -vv --mode slow --no-flag"))
assert args.inputs == ["a.txt", "b c.txt"] and args.count == 3 and args.verbose == 2
assert args.mode == "slow" and args.flag is False
try:
    parser.parse_args(["x", "--count", "notanint"])
except SystemExit as e:
    assert e.code == 2
else:
    raise AssertionError("argparse accepted a bad int")
assert "usage: tool" in parser.format_help()
assert shlex.join(["echo", "a b", "c'd"]) == "echo 'a b' 'c'\"'\"'d'"
assert shlex.quote("it's") == "'it'\"'\"'s'"

cfg = configparser.ConfigParser()
cfg.read_string("[db]\nhost = localhost\nport = 5432\n[flags]\ndebug = yes\n")
assert cfg.getint("db", "port") == 5432 and cfg.getboolean("flags", "debug")
assert cfg.get("db", "user", fallback="admin") == "admin"
toml = tomllib.loads('title = "x"\n[owner]\nname = "Tom"\ndob = 1979-05-27T07:32:00Z\n[[items]]\nn = 1\n[[items]]\nn = 2\n')
assert toml["owner"]["name"] == "Tom" and [i["n"] for i in toml["items"]] == [1, 2]
opts, rest = getopt.getopt(["-a", "-b", "val", "file"], "ab:")
assert opts == [("-a", ""), ("-b", "val")] and rest == ["file"]
print("OK argparse_config")
