"""A tiny PEP 503 package index for the install-jail tests.

  pkgindex.py wheel DIR NAME VERSION FILE=CONTENT...   a wheel with these files (FILE=@PATH: from a file)
  pkgindex.py sdist DIR NAME VERSION BACKEND_PY        an sdist built by an in-tree backend
  pkgindex.py serve DIR                                serves DIR/simple on 127.0.0.1:<free port>,
                                                       prints the port, runs until killed
"""
import base64, hashlib, http.server, io, os, sys, tarfile, zipfile


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def wheel(out, name, version, files):
    dist = f"{name}-{version}"
    files = dict(files)
    files[f"{dist}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    files[f"{dist}.dist-info/WHEEL"] = "Wheel-Version: 1.0\nGenerator: prims-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    rec = [record_line(p, c.encode()) for p, c in files.items()]
    rec.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(rec) + "\n"
    path = os.path.join(out, f"{dist}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for p, c in files.items():
            z.writestr(p, c)
    return path


def sdist(out, name, version, backend):
    dist = f"{name}-{version}"
    members = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        f'\n[project]\nname = "{name}"\nversion = "{version}"\n',
        "backend.py": open(backend).read(),
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    path = os.path.join(out, f"{dist}.tar.gz")
    with tarfile.open(path, "w:gz") as t:
        for p, c in members.items():
            data = c.encode()
            info = tarfile.TarInfo(f"{dist}/{p}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def index(root):
    """simple/<project>/index.html for every file under root/files."""
    files = os.path.join(root, "files")
    projects = {}
    for f in sorted(os.listdir(files)):
        project = f.split("-")[0].replace("_", "-").lower()
        projects.setdefault(project, []).append(f)
    for project, fs in projects.items():
        d = os.path.join(root, "simple", project)
        os.makedirs(d, exist_ok=True)
        links = []
        for f in fs:
            sha = hashlib.sha256(open(os.path.join(files, f), "rb").read()).hexdigest()
            links.append(f'<a href="../../files/{f}#sha256={sha}">{f}</a><br>')
        with open(os.path.join(d, "index.html"), "w") as h:
            h.write("<html><body>" + "\n".join(links) + "</body></html>\n")


def serve(root):
    index(root)
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=root, **k)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    cmd, out = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "files"), exist_ok=True)
    if cmd == "wheel":
        # FILE=CONTENT, or FILE=@PATH to take the content from a file.
        files = dict(a.split("=", 1) for a in sys.argv[5:])
        files = {k: open(v[1:]).read() if v.startswith("@") else v for k, v in files.items()}
        print(wheel(os.path.join(out, "files"), sys.argv[3], sys.argv[4], files))
    elif cmd == "sdist":
        print(sdist(os.path.join(out, "files"), sys.argv[3], sys.argv[4], sys.argv[5]))
    elif cmd == "serve":
        serve(out)
