//! Content-addressed Python environments built by uv in an install jail.
