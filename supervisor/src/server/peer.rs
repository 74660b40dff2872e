//! Who is connecting: `SO_PEERCRED`, checked before a single byte is read.

use super::Peer;
use tokio::net::UnixStream;

impl Peer {
    /// The credentials the kernel recorded when the peer connected.
    pub(super) fn of(stream: &UnixStream) -> std::io::Result<Peer> {
        let cred = stream.peer_cred()?;
        Ok(Peer {
            uid: cred.uid(),
            gid: cred.gid(),
            pid: cred.pid().unwrap_or(0),
        })
    }

    /// Root, or one of the configured uids.
    pub(super) fn allowed(&self, allowed_uids: &[u32]) -> bool {
        self.uid == 0 || allowed_uids.contains(&self.uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_always_allowed_others_only_when_listed() {
        let p = |uid| Peer {
            uid,
            gid: 0,
            pid: 1,
        };
        assert!(p(0).allowed(&[]));
        assert!(p(1000).allowed(&[1000]));
        assert!(!p(65534).allowed(&[1000]));
    }
}
