//! Sessions: workspaces, metadata, quotas, uids, expiry, recovery.
