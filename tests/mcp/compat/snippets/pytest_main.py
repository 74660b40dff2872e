# pytest run from code: a test file written into the working directory, run with
# pytest.main (fixtures, parametrize, tmp_path, capsys, monkeypatch), then a failing one.
import os
import tempfile
import textwrap
from pathlib import Path

import pytest

tests_dir = Path(tempfile.mkdtemp(prefix="compat_pytest_", dir=os.getcwd()))
(tests_dir / "test_compat_demo.py").write_text(textwrap.dedent('''
    import json
    import os
    import subprocess

    import pytest


    @pytest.fixture
    def records():
        return [{"id": i, "v": i * i} for i in range(5)]


    @pytest.mark.parametrize("x,expected", [(1, 1), (2, 4), (3, 9)])
    def test_square(x, expected):
        assert x * x == expected


    def test_records(records, tmp_path):
        path = tmp_path / "r.json"
        path.write_text(json.dumps(records))
        assert json.loads(path.read_text())[-1] == {"id": 4, "v": 16}


    def test_output(capsys):
        print("hello")
        assert capsys.readouterr().out == "hello\\n"


    def test_env(monkeypatch):
        monkeypatch.setenv("COMPAT_X", "1")
        assert os.environ["COMPAT_X"] == "1"


    def test_subprocess():
        assert subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout == "hi\\n"


    def test_raises():
        with pytest.raises(ZeroDivisionError):
            1 / 0


    @pytest.mark.skip(reason="demo")
    def test_skipped():
        raise AssertionError
'''))
(tests_dir / "test_compat_failing.py").write_text("def test_fails():\n    assert 1 + 1 == 3\n")

code = pytest.main([str(tests_dir / "test_compat_demo.py"), "-q"])
assert code == pytest.ExitCode.OK, code
code = pytest.main([str(tests_dir / "test_compat_failing.py"), "-q"])
assert code == pytest.ExitCode.TESTS_FAILED, code
print("OK pytest_main")
