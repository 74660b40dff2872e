//! Where the memory for a frame's body comes from. A header may announce
//! megabytes that never arrive; a server that serves many peers lends each
//! body its memory piece by piece, from a budget it shares, as the bytes
//! come. The reader asks before every allocation; what the budget is and
//! how it is shared is the server's business.

use std::convert::Infallible;
use std::future::Future;

/// Lends a [`BodyLease`] to each frame the reader starts.
pub trait BodyBudget {
    type Lease: BodyLease;

    /// A lease for one frame, holding nothing yet.
    fn lease(&self) -> Self::Lease;
}

/// The memory one frame's body may use. Dropping it gives back all it
/// holds (the frame completed, failed or was abandoned).
pub trait BodyLease: Send {
    type Error: std::error::Error + Send + Sync + 'static;

    /// Make a body buffer of `capacity` bytes legitimate before it is
    /// allocated, waiting for the budget if need be. Capacities only grow
    /// within one lease.
    fn cover(&mut self, capacity: usize) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// No budget: a body may grow to its frame's size (still only as its bytes
/// arrive). What a client uses for its one trusted server.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unbudgeted;

impl BodyBudget for Unbudgeted {
    type Lease = Unbudgeted;

    fn lease(&self) -> Unbudgeted {
        Unbudgeted
    }
}

impl BodyLease for Unbudgeted {
    type Error = Infallible;

    async fn cover(&mut self, _capacity: usize) -> Result<(), Infallible> {
        Ok(())
    }
}
