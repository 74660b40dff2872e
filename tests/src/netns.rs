//! A test host in a network namespace the test makes itself, joined to the
//! host by a veth pair. A server there is reached over a real route, at a
//! private address that no loopback rule covers, and it is gone (namespace,
//! links and processes) when the value drops.

use std::net::Ipv4Addr;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

pub struct NetnsHost {
    name: String,
    link: String,
    /// The host's end of the veth pair.
    pub host_addr: Ipv4Addr,
    /// The namespace's address, where its servers listen.
    pub addr: Ipv4Addr,
    children: Vec<Child>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl NetnsHost {
    /// A namespace with one /30 in 10.231.0.0/16 of its own (per process
    /// and call, so parallel tests never share one).
    pub fn new() -> NetnsHost {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let slot = (pid.wrapping_mul(8).wrapping_add(n)) % 16384;
        let (c, d) = ((slot / 64) as u8, ((slot % 64) * 4) as u8);
        let host = NetnsHost {
            name: format!("prims-t-{pid}-{n}"),
            link: format!("pt{}{n}", pid % 100_000),
            host_addr: Ipv4Addr::new(10, 231, c, d + 1),
            addr: Ipv4Addr::new(10, 231, c, d + 2),
            children: Vec::new(),
        };
        let (name, link) = (host.name.as_str(), host.link.as_str());
        ip(&["netns", "add", name]);
        ip(&[
            "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", name,
        ]);
        ip(&[
            "addr",
            "add",
            &format!("{}/30", host.host_addr),
            "dev",
            link,
        ]);
        ip(&["link", "set", link, "up"]);
        ip(&[
            "-n",
            name,
            "addr",
            "add",
            &format!("{}/30", host.addr),
            "dev",
            "eth0",
        ]);
        ip(&["-n", name, "link", "set", "eth0", "up"]);
        ip(&["-n", name, "link", "set", "lo", "up"]);
        host
    }

    /// `program` with `args`, run inside the namespace; killed on drop.
    pub fn spawn(
        &mut self,
        program: &str,
        args: &[&str],
        stdout: std::process::Stdio,
    ) -> &mut Child {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .stdout(stdout)
            .spawn()
            .expect("ip netns exec");
        self.children.push(child);
        self.children.last_mut().expect("just pushed")
    }
}

impl NetnsHost {
    /// A TCP listener at `addr:port` inside the namespace, for a server in
    /// this process (a socket keeps the namespace it was made in).
    pub fn listen(&self, port: u16) -> std::net::TcpListener {
        let path = format!("/run/netns/{}", self.name);
        let addr = (self.addr, port);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = std::fs::File::open(&path).expect("the namespace's file");
                nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                std::net::TcpListener::bind(addr).expect("a listener in the namespace")
            })
            .join()
            .expect("the listening thread")
        })
    }

    /// Both ends of the link send at most `rate` (tc's notation: "1gbit").
    pub fn limit_rate(&self, rate: &str) {
        let tbf = [
            "root", "tbf", "rate", rate, "burst", "256kb", "latency", "10ms",
        ];
        let run = |pre: &[&str], dev: &str| {
            let out = Command::new("tc")
                .args(pre)
                .args(["qdisc", "add", "dev", dev])
                .args(tbf)
                .output()
                .expect("tc (iproute2)");
            assert!(
                out.status.success(),
                "tc: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[], &self.link);
        run(&["-n", &self.name], "eth0");
    }
}

impl Default for NetnsHost {
    fn default() -> Self {
        NetnsHost::new()
    }
}

impl Drop for NetnsHost {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Deleting the namespace takes its end of the pair, and so the pair.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .stderr(std::process::Stdio::null())
            .status();
    }
}
