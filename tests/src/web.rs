//! Test web servers: python's http.server answering every GET with a fixed
//! body, plain or over TLS with a fresh self-signed certificate, on the
//! host's loopback or inside a [`NetnsHost`].

use crate::netns::NetnsHost;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const SERVER: &str = r#"
import http.server, ssl, sys
bind, port, body = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer((bind, port), H)
if len(sys.argv) > 5:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[4], sys.argv[5])
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// A certificate for `name`, valid a day: (cert.pem, key.pem) in `dir`.
pub fn certificate(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (key, cert) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.pem")),
    );
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", &format!("/CN={name}")])
        .args(["-addext", &format!("subjectAltName=DNS:{name}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    (cert, key)
}

/// The server's arguments: bind address, port (0: any), body, and for TLS
/// the certificate and key.
fn args(bind: &str, port: u16, body: &str, tls: Option<(&Path, &Path)>) -> Vec<String> {
    let mut a = vec![
        "-c".into(),
        SERVER.into(),
        bind.into(),
        port.to_string(),
        body.into(),
    ];
    if let Some((cert, key)) = tls {
        a.push(cert.display().to_string());
        a.push(key.display().to_string());
    }
    a
}

fn port_of(child: &mut Child) -> u16 {
    let out = child.stdout.take().expect("a piped stdout");
    let mut line = String::new();
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .expect("the server's port");
    line.trim()
        .parse()
        .unwrap_or_else(|_| panic!("the server printed {line:?}, not its port"))
}

/// A server on the host's loopback: its port and process (kill it when done).
pub fn on_loopback(body: &str, tls: Option<(&Path, &Path)>) -> (u16, Child) {
    let mut child = Command::new("/usr/bin/python3")
        .args(args("127.0.0.1", 0, body, tls))
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    (port_of(&mut child), child)
}

/// A server at `host.addr:port` inside the namespace, which owns it.
pub fn in_netns(host: &mut NetnsHost, port: u16, body: &str, tls: Option<(&Path, &Path)>) -> u16 {
    let bind = host.addr.to_string();
    let a = args(&bind, port, body, tls);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    port_of(host.spawn("/usr/bin/python3", &a, Stdio::piped()))
}
