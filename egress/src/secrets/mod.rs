//! Secrets at the edge: jailed code holds a placeholder of its session's,
//! and the proxy, outside the jail, puts the value in its place in the one
//! header and for the hosts the policy names ([`place`]; an AWS request is
//! signed again with the real key, [`aws`]), refuses the
//! placeholder anywhere else, and puts the placeholder back wherever an
//! upstream's answer repeats the value ([`stream`]). Values live only in
//! this process's memory ([`SecretText`], wiped when dropped); a reload
//! replaces them for every session's next request, placeholders unchanged.

pub mod aws;
pub mod place;
mod placement;
pub mod stream;
pub(crate) mod text;
mod values;

pub use placement::Placement;
pub use text::SecretText;
pub use values::{SecretValue, Values};
