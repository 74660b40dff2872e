//! cgroups.
