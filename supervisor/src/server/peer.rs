//! Who is connecting: `SO_PEERCRED`, checked before a single byte is read.
//! Only the uid decides: the socket's group lets processes reach the file,
//! but a peer's gid (or its groups) never lets it in.

use crate::accounts::NOBODY_UID;
use tokio::net::UnixStream;

/// The process at the other end of a connection, from `SO_PEERCRED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: i32,
}

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

    /// Root, or one of the configured uids; never [`NOBODY_UID`].
    pub(super) fn allowed(&self, allowed_uids: &[u32]) -> bool {
        self.uid != NOBODY_UID && (self.uid == 0 || allowed_uids.contains(&self.uid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32) -> Peer {
        Peer { uid, gid, pid: 1 }
    }

    #[test]
    fn root_is_always_allowed_others_only_when_listed() {
        assert!(peer(0, 0).allowed(&[]));
        assert!(peer(1000, 1000).allowed(&[1000]));
        assert!(!peer(4242, 4242).allowed(&[1000]));
    }

    #[test]
    fn nobody_is_refused_even_when_listed() {
        assert!(!peer(NOBODY_UID, NOBODY_UID).allowed(&[NOBODY_UID]));
        assert!(!peer(NOBODY_UID, 0).allowed(&[NOBODY_UID, 1000]));
    }

    #[test]
    fn the_gid_never_lets_a_peer_in() {
        // The front-end's (or root's) group on an unlisted uid.
        assert!(!peer(4242, 1000).allowed(&[1000]));
        assert!(!peer(4242, 0).allowed(&[1000]));
    }
}
