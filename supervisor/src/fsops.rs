//! Workspace file operations that never follow a planted symlink out.
