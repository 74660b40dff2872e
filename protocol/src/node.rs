//! Which node of a cluster holds a session. In a cluster every session id
//! (and every legacy `Mcp-Session-Id`) begins with its node's id as four
//! lowercase hex digits, so a stock proxy routes a request on the first
//! characters of a header, with no table to learn or share. A single host
//! has no node id and its session ids are all random.

use std::fmt;

/// How many hex digits of a session id name its node.
pub const NODE_HEX: usize = 4;

/// A node's number in its cluster, 0 to 65535 (a StatefulSet's ordinal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(pub u16);

impl NodeId {
    /// A node number as an operator writes it: decimal, 0 to 65535.
    pub fn parse(s: &str) -> Result<NodeId, String> {
        s.trim().parse::<u16>().map(NodeId).map_err(|_| {
            format!("node id {s:?} is not a number from 0 to 65535 (a StatefulSet ordinal, say)")
        })
    }

    /// The node a session id or a legacy MCP session id names, if it is one
    /// of a cluster's (any id starting with four hex digits parses).
    pub fn of(id: &str) -> Option<NodeId> {
        let head = id.get(..NODE_HEX)?;
        if !head.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        u16::from_str_radix(head, 16).ok().map(NodeId)
    }

    /// The id's first two bytes, as a session id starts with them.
    pub fn bytes(self) -> [u8; 2] {
        self.0.to_be_bytes()
    }
}

/// Four lowercase hex digits: the prefix of this node's ids.
impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse_back() {
        for n in [0u16, 1, 9, 10, 255, 4096, 65535] {
            let id = format!("{}{}", NodeId(n), "0".repeat(28));
            assert_eq!(NodeId::of(&id), Some(NodeId(n)), "{id}");
        }
        assert_eq!(NodeId(3).to_string(), "0003");
        assert_eq!(NodeId(3).bytes(), [0, 3]);
    }

    #[test]
    fn bad_numbers_and_ids_are_refused() {
        assert_eq!(NodeId::parse("12"), Ok(NodeId(12)));
        for bad in ["", "-1", "65536", "x", "0x10"] {
            assert!(NodeId::parse(bad).is_err(), "{bad}");
        }
        for id in ["", "abc", "ABCD0000", "zz00", "00g1"] {
            assert_eq!(NodeId::of(id), None, "{id}");
        }
    }
}
