//! Policy: filled in by the policy work.
