//! Why a jailer could not be started or waited for.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("creating a memfd for the job spec")]
    Memfd(#[source] io::Error),
    #[error("starting the jailer {path}")]
    Spawn {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("encoding the job spec")]
    Encode(#[from] serde_json::Error),
    #[error("passing the proxy channel to the jailer")]
    ProxyChannel(#[source] io::Error),
    #[error("passing the interpreter channel to the jailer")]
    Channel(#[source] io::Error),
    #[error("waiting for the jailer")]
    Wait(#[source] io::Error),
}
