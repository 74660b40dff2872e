//! Supervisor.
