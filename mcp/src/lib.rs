//! The MCP front-end. Its tools arrive with the front-end issue; this crate
//! exists so the workspace layout is complete.
