//! The jailer library.
