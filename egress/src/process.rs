//! The egress proxy process: it serves the listeners the supervisor hands
//! it, each under the rules of the run in progress in that jail, and
//! reports each run's record when the run ends. It exits when the
//! supervisor's end of the control channel closes.

use crate::control::{Channel, FromProxy, ToProxy, CONFIGURE_FAILED};
use crate::decide::Rules;
use crate::inspect::{Inspection, Tls};
use crate::resolve::Resolver;
use crate::run::{Budget, Current, Run};
use crate::secrets::SecretText;
use crate::serve::serve;
use crate::serve::Edge;
use crate::tls::authority::{Authority, CaPem};
use crate::tls::upstream::client_config;
use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long the end of a run waits for its connections to close.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

struct Jail {
    current: Current,
    runs: HashMap<u64, Arc<Run>>,
    stop: CancellationToken,
}

/// The run of a jail between the supervisor's runs: it refuses everything.
fn idle() -> Arc<Run> {
    let rules = Rules {
        closed: Some(
            "no call is running in this session; connections are allowed only while one runs"
                .into(),
        ),
        ..Rules::default()
    };
    Run::new(
        rules,
        Budget {
            max_bytes: 0,
            max_connections: 0,
        },
    )
}

/// Raises the soft limit on open files to the hard one: each relayed
/// connection holds two sockets and two pipes, and the default soft limit
/// of 1024 would cut connections once a few jails are busy.
pub fn raise_fd_limit() -> nix::Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    Ok(hard)
}

/// Serves until the supervisor goes away.
pub async fn run(control: Channel, resolver: Resolver) -> io::Result<()> {
    let control = Arc::new(control);
    let inspection = Inspection::default();
    let mut jails: HashMap<u64, Jail> = HashMap::new();
    let stop_all = CancellationToken::new();
    let _stop_on_exit = stop_all.clone().drop_guard();
    while let Some((msg, fd)) = control.recv::<ToProxy>().await? {
        match msg {
            ToProxy::Configure {
                ca_cert,
                ca_key,
                upstream_ca,
                secrets,
            } => {
                inspection.values.replace(secrets);
                // Off this loop: loading the system's roots can take more
                // than the watchdog's second on a slow machine, and the
                // loop must keep answering its pings.
                let (inspection, control) = (inspection.clone(), control.clone());
                tokio::spawn(async move {
                    let made = tokio::task::spawn_blocking(move || {
                        configure(&inspection, ca_cert, ca_key, &upstream_ca)
                    })
                    .await
                    .unwrap_or_else(|e| Err(format!("configuring panicked: {e}")));
                    if let Err(why) = made {
                        tracing::error!(why, "egress: could not configure TLS inspection");
                        let jail = CONFIGURE_FAILED;
                        let _ = control.send(&FromProxy::Refused { jail, why }, None).await;
                    }
                });
            }
            ToProxy::Attach { jail } => match listener(fd) {
                Ok(l) => {
                    let current = Current::new(idle());
                    let stop = stop_all.child_token();
                    let edge = Edge {
                        resolver: resolver.clone(),
                        inspection: inspection.clone(),
                    };
                    tokio::spawn(serve(l, current.clone(), edge, stop.clone()));
                    if let Some(old) = jails.insert(
                        jail,
                        Jail {
                            current,
                            runs: HashMap::new(),
                            stop,
                        },
                    ) {
                        old.stop.cancel();
                    }
                }
                Err(why) => {
                    tracing::warn!(jail, why, "egress: refused a listener");
                    control
                        .send(&FromProxy::Refused { jail, why }, None)
                        .await?;
                }
            },
            ToProxy::Begin {
                jail,
                run,
                list,
                trust_named_addresses,
                max_bytes,
                max_connections,
                inspect,
                passthrough,
                placements,
            } => {
                let Some(j) = jails.get_mut(&jail) else {
                    tracing::warn!(jail, run, "egress: a run began in a jail never attached");
                    continue;
                };
                let rules = Rules {
                    list,
                    trust_named_addresses,
                    closed: None,
                    inspect,
                    passthrough,
                    placements,
                };
                let r = Run::new(
                    rules,
                    Budget {
                        max_bytes,
                        max_connections,
                    },
                );
                j.current.replace(r.clone());
                j.runs.insert(run, r);
                control.send(&FromProxy::Begun { jail, run }, None).await?;
            }
            ToProxy::End { jail, run } => {
                let ended = jails.get_mut(&jail).and_then(|j| {
                    let r = j.runs.remove(&run)?;
                    if Arc::ptr_eq(&j.current.get(), &r) {
                        j.current.replace(idle());
                    }
                    Some(r)
                });
                // Its connections close first, so its record is final and
                // nothing moves once the call is over.
                let control = control.clone();
                tokio::spawn(async move {
                    let report = match ended {
                        Some(r) => {
                            r.end(CLOSE_WAIT).await;
                            r.log.snapshot()
                        }
                        None => Default::default(),
                    };
                    let msg = FromProxy::Report { jail, run, report };
                    if let Err(e) = control.send(&msg, None).await {
                        tracing::warn!(error = %e, "egress: could not report a run");
                    }
                });
            }
            ToProxy::Ping { seq } => control.send(&FromProxy::Pong { seq }, None).await?,
            ToProxy::Detach { jail } => {
                if let Some(j) = jails.remove(&jail) {
                    j.stop.cancel();
                }
            }
        }
    }
    tracing::info!("egress: the supervisor closed the control channel; exiting");
    Ok(())
}

/// Inspection with the supervisor's CA and roots.
fn configure(
    inspection: &Inspection,
    ca_cert: String,
    ca_key: SecretText,
    upstream_ca: &[String],
) -> Result<(), String> {
    let ca = CaPem {
        cert: ca_cert,
        key: zeroize::Zeroizing::new(ca_key.expose().to_string()),
    };
    let authority = Authority::new(&ca).map_err(|e| e.to_string())?;
    let upstream = client_config(upstream_ca).map_err(|e| e.to_string())?;
    inspection.set(Tls {
        authority,
        upstream,
    });
    Ok(())
}

/// The fd must be a listening TCP socket, whatever came with the message.
fn listener(fd: Option<OwnedFd>) -> Result<tokio::net::TcpListener, String> {
    use nix::sys::socket::{getsockopt, sockopt, SockType};
    let fd = fd.ok_or("no socket came with the message")?;
    let listening = getsockopt(&fd, sockopt::AcceptConn).map_err(|e| e.to_string())?;
    let ty = getsockopt(&fd, sockopt::SockType).map_err(|e| e.to_string())?;
    if !listening || ty != SockType::Stream {
        return Err("not a listening TCP socket".into());
    }
    let l = std::net::TcpListener::from(fd);
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    tokio::net::TcpListener::from_std(l).map_err(|e| e.to_string())
}
