//! The supervisor socket: listener, peer check, framed connections, request dispatch.
